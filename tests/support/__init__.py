"""What the tests that talk to a real `mcp-team` process share: where the command is, the environment a
child gets, the hand-written MCP handshake, and free ports.

Everything here works per process, so it is safe under pytest-xdist: nothing uses a fixed port or file.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

MCP_TEAM = str(Path(sys.executable).parent / "mcp-team")

# Variables of the machine running the tests that would change what a child does: the model backends and
# their keys, mcp-team's own settings, and tracing (an OTEL_* variable would turn tracing on in a child
# whose test expects it off, or send its spans to the developer's collector).
SCRUBBED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "MCP_TEAM_", "OTEL_")

# The test MCP server with an `add` (annotated read-only) and an `echo` tool, as a team file's server entry.
ECHO_MCP_SERVER_FILE = str(Path(__file__).parents[1] / "fixtures" / "echo_mcp_server.py")
ECHO_MCP_SERVER = f"""
[[mcp_servers]]
name = "echo"
command = {json.dumps(sys.executable)}
args = [{json.dumps(ECHO_MCP_SERVER_FILE)}]
allowed_tools = ["add", "echo"]
"""
# A team of two: `adder` with the echo server's `add`, and `poet` with no tools.
ADDER_TEAM = (
    ECHO_MCP_SERVER
    + """
[[specialists]]
name = "adder"
description = "Adds numbers with the echo server."
prompt = "Add the numbers with your add tool."
tools = ["echo/add"]

[[specialists]]
name = "poet"
description = "Writes short poems."
prompt = "Write a short poem."
"""
)

# Where `clean_env` puts each child's state directory: one folder per test process, removed when it exits, so a
# suite run leaves none of its thousands behind in /tmp.
_STATE_ROOT = tempfile.TemporaryDirectory(prefix="mcp-team-tests-", ignore_cleanup_errors=True)

# A guard against a hang, never a speed claim: waits that must end get this long, far more than a loaded
# machine needs, and less than pytest-timeout, so a hang fails with a message saying what was awaited.
HANG_GUARD = 60.0


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without `SCRUBBED_PREFIXES`, unbuffered, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(SCRUBBED_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"  # a child's output arrives as it is written, even if the child is killed
    # Durable runs are on by default: each child keeps them in a state directory of its own, never the user's.
    env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="state-", dir=_STATE_ROOT.name)
    return {**env, **extra}


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`mcp-team ARGS` in a process of its own, in `clean_env(**env)`: for what only a process shows (signals, a
    terminal's encoding, content capture, which is the process's); `cli_here` for the rest."""
    return subprocess.run([MCP_TEAM, *args], capture_output=True, text=True, timeout=HANG_GUARD, cwd=cwd,
                          env=clean_env(**(env or {})))  # fmt: skip


def cli_here(*args: str, cwd: str | Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`mcp-team ARGS` through `main` in this process, with its exit code and output as `subprocess.run` gives
    them: for what a command says, where its process is not the point (a process costs a second or more of CPU,
    mostly imports; the suite is CPU-bound). As in a child: the environment `clean_env(**env)` gives, `cwd`,
    warnings logged to stderr, the secrets it registers forgotten after. Each module keeps its commands' real
    processes for what only a process shows (signals, exit at once, start-up, stdio). Runs here are
    --ephemeral, or fail before their runs open: DBOS is a process's, not a test's. A command still going after
    `HANG_GUARD` (a refusal that regressed into serving) is stopped as Ctrl-C would, and the test fails saying so."""
    from mcp_team.cli.main import main
    from mcp_team.telemetry.content import clear_secrets

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    lock, state = threading.Lock(), {"done": False, "stopped": False}

    def stop() -> None:
        with lock:
            if not state["done"]:
                state["stopped"] = True
                os.kill(os.getpid(), signal.SIGINT)  # taken by the main thread, where `main` runs

    guard = threading.Timer(HANG_GUARD, stop)
    guard.start()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        for name in list(os.environ):
            if name.upper().startswith(SCRUBBED_PREFIXES):
                patch.delenv(name)
        for name, value in clean_env(**env).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        root.handlers = []  # so that `log_to_stderr` logs to stderr, as in a child, not to pytest's capture
        try:
            code = main(list(args))
        finally:
            with lock:
                state["done"] = True
            guard.cancel()
            root.handlers = handlers
            root.setLevel(level)
            clear_secrets()
    assert not state["stopped"], f"mcp-team {' '.join(args)} was still going after {HANG_GUARD:g} s: {err.getvalue()}"
    return subprocess.CompletedProcess([MCP_TEAM, *args], code, out.getvalue(), err.getvalue())


def initialize(protocol_version: str = "2025-11-25", request_id: int = 1) -> dict[str, Any]:
    """The `initialize` request a 2025-era client sends first."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def stdio_lines(*messages: dict[str, Any]) -> str:
    """Messages as the stdio transport frames them: one JSON object per line."""
    return "".join(json.dumps(m) + "\n" for m in messages)


def free_port() -> int:
    """A port that was free a moment ago (the OS picks it). For a port nothing listens on, or to hand to a
    child, which must cope with losing a race for it (see `serve_http`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_http(*args: str, env: dict[str, str], attempts: int = 3) -> Iterator[str]:
    """`mcp-team serve --http` on a free port, up and healthy; yields its base URL, stops it after."""
    with serve_http_process(*args, env=env, attempts=attempts) as (base, _):
        yield base


@contextmanager
def serve_http_process(
    *args: str, env: dict[str, str], attempts: int = 3, stderr: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`serve_http`, yielding the server's process too; with `stderr`, the server's stderr is kept in that file
    (to read what it said as it stopped).

    Another process (an xdist worker, a neighbour's test) can take the port between `free_port` and the
    child's bind: the child then exits, and this tries a new port. Its stderr goes to a file, which never
    fills up and blocks the server the way an unread pipe can."""
    failures: list[str] = []
    for _ in range(attempts):
        port = free_port()
        with stderr.open("w+b") if stderr is not None else tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [MCP_TEAM, "serve", "--http", "--port", str(port), *args],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            base = f"http://127.0.0.1:{port}"
            if wait_healthy(base, proc):
                try:
                    yield base, proc
                finally:
                    proc.terminate()
                    proc.wait(timeout=HANG_GUARD)
                return
            proc.kill()
            proc.wait(timeout=HANG_GUARD)
            err.seek(0)
            failures.append(err.read().decode(errors="replace"))
        if "address already in use" not in failures[-1]:
            break
    raise RuntimeError("mcp-team serve --http did not start:\n" + "\n---\n".join(failures))


def plain_http(**kwargs: Any) -> httpx2.Client:
    """An HTTP client for plain http on 127.0.0.1: without the system's certificates, which no such request reads
    and which cost 0.1-0.2 s of CPU to load, per client (`httpx2.get` makes one a call), in a CPU-bound suite."""
    return httpx2.Client(verify=False, **kwargs)


def plain_http_async(**kwargs: Any) -> httpx2.AsyncClient:
    """`plain_http`, async."""
    return httpx2.AsyncClient(verify=False, **kwargs)


def wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> bool:
    """True once `base`/healthz answers 200; False if the process exits first or the hang guard passes."""
    deadline = time.monotonic() + HANG_GUARD
    with plain_http(timeout=1) as http:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if http.get(f"{base}/healthz").status_code == 200:
                    return True
            except httpx2.TransportError:
                pass
            time.sleep(0.1)
    return False


def stored_runs(db: Path) -> list[dict[str, Any]]:
    """The run records in a SQLite run store, read as another process would ([] before the tables exist)."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT record FROM mcp_team_runs").fetchall()
    except sqlite3.OperationalError:  # not created yet, or busy
        return []
    return [json.loads(text) for (text,) in rows]


def stored_finished(db: Path, key: str = "target") -> set[str]:
    """`key` (target or id) of every handoff the run store shows completed."""
    return {h[key] for r in stored_runs(db) for h in (r.get("result") or {}).get("handoffs", [])
            if h["status"] == "completed"}  # fmt: skip


@asynccontextmanager
async def serving_here(app: Any, port: int) -> AsyncIterator[None]:
    """`app` served by uvicorn on 127.0.0.1:`port` in this process, so a test can look at the server's objects."""
    import uvicorn

    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        with anyio.fail_after(HANG_GUARD):
            while not web.started:  # noqa: ASYNC110 (uvicorn has no event for it)
                await anyio.sleep(0.02)
        try:
            yield
        finally:
            web.should_exit = True


async def listed_runs(session: Any) -> list[dict[str, Any]]:
    """The server's runs as `team://runs` lists them (newest first), through an MCP client session."""
    result = await session.read_resource("team://runs")
    return json.loads(result.contents[0].text)["runs"]  # type: ignore[no-any-return]


async def run_listed(session: Any, finished: bool = True) -> dict[str, Any]:
    """The record of the server's newest run, once it is listed (and, with `finished`, has finished): waits for
    that, polling the listing, at most `HANG_GUARD` seconds."""
    with anyio.fail_after(HANG_GUARD):
        while True:
            runs = await listed_runs(session)
            if runs and (not finished or runs[0]["status"] != "running"):
                result = await session.read_resource(runs[0]["uri"])
                return json.loads(result.contents[0].text)  # type: ignore[no-any-return]
            await anyio.sleep(0.05)


RUN_TOOLS = frozenset({"start_run", "get_run", "cancel_run", "answer_checkpoint"})  # on every server
