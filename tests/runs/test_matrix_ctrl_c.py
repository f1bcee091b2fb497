"""The Ctrl-C matrix of issue 32: 50 SIGINTs at random moments of `mcp-team run` (the real command, offline model at
1.5 s a call, durable runs in the default state directory of a temporary XDG_STATE_HOME), each command followed by
more `mcp-team run`s on the same state directory.

Every interrupted command exits 130 (or, when the run had finished before the signal reached it, with the run's own
status: 0 complete, 3 partial; a signal as the interpreter exits, once the command has ended, kills it as Python
does, which a shell reads as 130 too), never says "unexpected" nor shows a traceback (but Python's own, for a
signal in the interpreter's start-up, before any code of mcp-team's runs); every run it started is recorded
cancelled or finished; no later command on the state directory resumes it (none says it resumes an earlier run, no
record shows a resume or a second execution, its record is the same byte for byte after every later command, and
its DBOS workflow is not left pending, to come back at some later start).

The moments: the team is two workers and the request asks both, so a run is one supervisor turn (planning), two
handoffs at once (fan-out), the supervisor's last turn (synthesis), then the answer on stdout. Each trial picks a
phase and a random delay after the line that begins it (start-up: from the command's start), so the 50 signals are
spread over start-up, planning, fan-out, synthesis and writing the answer on any machine, however slow; a few send
a second SIGINT 50 ms after the first. The trials run as chains: each chain is one state directory, where every
command is the "next `mcp-team run`" of the one before it, and a last one, not interrupted, ends the chain; chains
run side by side. Set MCP_TEAM_TEST_SEED to replay a failed matrix (its seed is in every assertion message).

`make test` runs 10 trials in 2 chains; MCP_TEAM_MATRIX_FULL=1 runs the issue's 50 in 5 chains.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteReceiveStream, Process

from support import HANG_GUARD, MCP_TEAM, clean_env

FULL = os.environ.get("MCP_TEAM_MATRIX_FULL") == "1"  # the full counts, not those of `make test`
pytestmark = [pytest.mark.anyio, pytest.mark.process, pytest.mark.timeout(1800 if FULL else 600)]

TEAM = "\n".join(f'[[specialists]]\nname = "w{i}"\ndescription = "Worker {i}."\nprompt = "You are worker {i}."\n'
                 for i in (1, 2))  # fmt: skip
REQUEST = "w1 and w2: each say hello"
LATENCY_MS = 1500
# The 50 trials with MCP_TEAM_MATRIX_FULL=1 (about 3 minutes on 2 cores); 10 in `make test` (about 40 s).
TRIALS, CHAINS = (50, 5) if FULL else (10, 2)
DOUBLE = 6 if FULL else 2  # trials that send a second SIGINT 50 ms after the first
# Where a signal is aimed: after which line (None: the command's start), and how long after it (from, to). A model
# call takes 1.5 s: "answer" is aimed at the end of the last one, where the run ends, its answer is written and the
# command exits.
PHASES: dict[str, tuple[str | None, float, float]] = {
    "start-up": (None, 0.0, 2.5),
    "planning": ("· run ", 0.0, 1.4),
    "fan-out": ("→ h2 ", 0.0, 1.4),
    "synthesis": ("✓ h", 0.0, 1.4),  # the second ✓ (see `_Command.anchor`)
    "answer": ("✓ h", 1.35, 1.9),
}
CANCELLED_OR_OWN = {"complete": 0, "partial": 3}


@dataclass
class _Command:
    """One `mcp-team run` and what it said, line by line, with when."""

    index: int
    phase: str | None = None
    delay: float = 0.0
    double: bool = False
    lines: list[tuple[float, str, str]] = field(default_factory=list)  # (time, stream, line)
    signalled_after: str = ""  # the last line said before the (first) signal
    code: int | None = None
    started: float = 0.0
    hung: bool = False

    def said(self, stream: str | None = None) -> str:
        return "\n".join(line for _, s, line in self.lines if stream is None or s == stream)

    @property
    def run_id(self) -> str | None:
        for _, _, line in self.lines:
            if line.startswith("mcp-team: run "):
                return line.split()[2]
        return None

    def anchor(self, what: str | None) -> bool:
        if what is None:
            return True
        if what == "stdout":
            return any(s == "stdout" for _, s, _ in self.lines)
        needed = 2 if what == "✓ h" else 1
        return sum(line.startswith(what) for _, s, line in self.lines if s == "stderr") >= needed

    def describe(self) -> str:
        how = "double " if self.double else ""
        hung = f"HUNG for {HANG_GUARD:g} s, " if self.hung else ""
        head = (f"command {self.index} ({hung}{how}SIGINT in {self.phase}, {self.delay:.2f} s after its line; "
                f"exit {self.code})")  # fmt: skip
        said = "\n".join(f"  {at - self.started:6.2f} {s}: {line}" for at, s, line in self.lines)
        return f"{head}, signalled after {self.signalled_after!r}:\n{said}"


async def _read(stream: ByteReceiveStream | None, name: str, command: _Command, changed: Callable[[], None]) -> None:
    if stream is None:
        return
    buffered = b""
    async for chunk in stream:
        buffered += chunk
        *complete, buffered = buffered.split(b"\n")
        for raw in complete:
            command.lines.append((time.monotonic(), name, raw.decode(errors="replace")))
        changed()
    if buffered:
        command.lines.append((time.monotonic(), name, buffered.decode(errors="replace")))


async def _run(command: _Command, env: dict[str, str], latency_ms: int) -> None:
    """Run `mcp-team run` to its end; signal it as `command` says (no phase: never)."""
    args = [MCP_TEAM, "run", "--team", env["TEAM_FILE"], REQUEST]
    environ = {**env, "MCP_TEAM_OFFLINE_LATENCY_MS": str(latency_ms)}
    changed = anyio.Event()

    def notify() -> None:
        nonlocal changed
        changed.set()
        changed = anyio.Event()

    command.started = time.monotonic()
    proc = await anyio.open_process(args, env=environ)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read, proc.stdout, "stdout", command, notify)
        tg.start_soon(_read, proc.stderr, "stderr", command, notify)
        with anyio.move_on_after(HANG_GUARD):
            if command.phase is not None:
                what = PHASES[command.phase][0]
                while not command.anchor(what) and proc.returncode is None:
                    with anyio.move_on_after(0.5):  # also sees the process end, which says no line
                        await changed.wait()
                await anyio.sleep(command.delay)
                command.signalled_after = command.lines[-1][2] if command.lines else "(nothing yet)"
                if proc.returncode is None:
                    _signal(proc, signal.SIGINT)
                    if command.double:
                        await anyio.sleep(0.05)
                        if proc.returncode is None:
                            _signal(proc, signal.SIGINT)
            command.code = await proc.wait()
        if command.code is None:  # hung: every thread's stack on its stderr (PYTHONFAULTHANDLER), then killed
            command.hung = True
            _signal(proc, signal.SIGABRT)
            with anyio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                _signal(proc, signal.SIGKILL)
            command.code = await proc.wait()
    await proc.aclose()


def _signal(proc: Process, sig: int) -> None:
    """`sig` to the command, by its pid. Not `proc.send_signal`: asyncio hands it to `subprocess.Popen.send_signal`,
    which polls the process first, and a poll that reaps a command that has just exited takes its exit status
    from asyncio's child watcher, which then reports 255 ("Unknown child process"). Seen once, a second Ctrl-C
    50 ms after a first that ended the command in its start-up. A command not yet reaped keeps its pid."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)


def _records(db: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, record FROM mcp_team_runs").fetchall()
    return {run_id: json.loads(text) for run_id, text in rows}


def _workflows(db: Path) -> dict[str, str]:
    """DBOS's status of every run workflow (a run's workflow id is its run id)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT workflow_uuid, status FROM workflow_status").fetchall()
    return dict(rows)


def _plan(rng: random.Random) -> list[tuple[str, float, bool]]:
    """(phase, delay, double) of each trial: as many in each phase, the doubles spread over them, shuffled."""
    phases = [list(PHASES)[i % len(PHASES)] for i in range(TRIALS)]
    doubles = set(range(0, TRIALS, TRIALS // DOUBLE)[:DOUBLE])
    trials = [(p, rng.uniform(*PHASES[p][1:]), i in doubles) for i, p in enumerate(phases)]
    rng.shuffle(trials)
    return trials


@dataclass
class _Chain:
    """Commands one after the other on one state directory, and the run records as each command left them."""

    root: Path
    commands: list[_Command] = field(default_factory=list)
    after: list[dict[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return self.root / "state" / "mcp-team" / "runs.sqlite"

    async def run(self, trials: list[tuple[str, float, bool]], first: int) -> None:
        env = clean_env(MCP_TEAM_MODEL="offline", PYTHONFAULTHANDLER="1", XDG_STATE_HOME=str(self.root / "state"),
                        TEAM_FILE=str(self.root / "team.toml"))  # fmt: skip
        for i, (phase, delay, double) in enumerate(trials):
            self.commands.append(command := _Command(first + i, phase, delay, double))
            await _run(command, env, LATENCY_MS)
            self.after.append(_records(self.db) if self.db.exists() else {})
        self.commands.append(last := _Command(first + len(trials)))  # the last: no signal, no model latency
        await _run(last, env, 0)


def _before_any_of_ours(command: _Command) -> bool:
    """A Ctrl-C in the interpreter's own start-up, before the command's first line of code (the console script's
    `import re`, written by the installer): Python's KeyboardInterrupt traceback, no frame of mcp-team's, no
    run. Nothing of the command has run to take the signal; every later one is the command's to take. Earlier
    still, while Python imports its `site` module, it is Python's "Fatal Python error: init_import_site", exit 1
    (seen once, at load 4)."""
    stderr = command.said("stderr")
    return (stderr.startswith(("Traceback", "Fatal Python error: init_import_site"))
            and stderr.rstrip().endswith("KeyboardInterrupt") and "mcp_team" not in stderr
            and command.run_id is None)  # fmt: skip


def _check_chain(chain: _Chain, seed: int) -> list[str]:
    """What is wrong in one chain (empty: nothing)."""
    problems: list[str] = []
    *interrupted, last = chain.commands
    final = _records(chain.db)
    workflows = _workflows(chain.db)
    for command in chain.commands:
        if command.hung:
            problems.append(f"the command did not end: {command.describe()}")
        stderr = command.said("stderr")
        for wrong in ("unexpected", "Traceback", "also resuming", "did not finish before this one"):
            if wrong in stderr and not _before_any_of_ours(command):
                problems.append(f"said {wrong!r}: {command.describe()}")
    if last.code != 0 or last.run_id is None or final.get(last.run_id, {}).get("status") != "complete":
        problems.append(f"the chain's last command did not complete its run: {last.describe()}")
    for command, after in zip(interrupted, chain.after, strict=True):
        run_id = command.run_id
        record = final.get(run_id) if run_id else None
        status = record["status"] if record else None
        if (command.code not in (130, -signal.SIGINT) and command.code != CANCELLED_OR_OWN.get(status or "", -1)
                and not _before_any_of_ours(command)):  # fmt: skip
            problems.append(f"exit {command.code} with its run {status}: {command.describe()}")
        if run_id is not None and record is None:
            problems.append(f"its run {run_id} is not in the store: {command.describe()}")
        if record is not None and after.get(run_id) != record:
            problems.append(f"its run's record changed after the command ended: {command.describe()}\n"
                            f"then: {json.dumps(after.get(run_id))}\nat the end: {json.dumps(record)}")  # fmt: skip
    for run_id, record in final.items():
        if record["status"] not in ("cancelled", "complete", "partial"):
            problems.append(f"run {run_id} ended {record['status']} ({record.get('reason')})")
        if record.get("resumed") or record.get("executions") != 1:
            problems.append(f"run {run_id} was resumed: {record.get('resumed')}, {record.get('executions')} "
                            "execution(s)")  # fmt: skip
        if workflows.get(run_id) in ("PENDING", "ENQUEUED"):
            problems.append(f"run {run_id} is {record['status']}, but its workflow is {workflows[run_id]}: a later "
                            "start would resume it")  # fmt: skip
        for branch, state in workflows.items():
            if branch.startswith(run_id + "/") and state in ("PENDING", "ENQUEUED"):
                problems.append(f"a branch of run {run_id} ({branch}) is {state}: a later start would resume it")
    return [f"[seed {seed}] {p}" for p in problems]


async def test_ctrl_c_at_random_moments_of_mcp_team_run_cancels_for_good(tmp_path: Path) -> None:
    seed = int(os.environ.get("MCP_TEAM_TEST_SEED") or random.randrange(1 << 30))
    trials = _plan(random.Random(seed))
    per_chain = len(trials) // CHAINS
    chains = [_Chain(tmp_path / f"chain{c}") for c in range(CHAINS)]
    async with anyio.create_task_group() as tg:
        for c, chain in enumerate(chains):
            chain.root.mkdir()
            (chain.root / "team.toml").write_text(TEAM, encoding="utf-8")
            tg.start_soon(chain.run, trials[c * per_chain : (c + 1) * per_chain], c * (per_chain + 1))
    problems = [p for chain in chains for p in _check_chain(chain, seed)]
    interrupted = [c for chain in chains for c in chain.commands[:-1]]
    assert len(interrupted) == TRIALS and sum(c.double for c in interrupted) == DOUBLE
    assert not problems, "\n\n".join(problems)
    # What became of the runs, by the phase each signal was aimed at (-s shows it)
    final = {rid: r["status"] for chain in chains for rid, r in _records(chain.db).items()}
    outcomes: dict[str, list[str]] = {}
    for c in interrupted:
        outcomes.setdefault(str(c.phase), []).append(f"{c.code}:{final.get(c.run_id or '', 'no run')}")
    print(f"seed {seed}: exit and run by phase {outcomes}")
