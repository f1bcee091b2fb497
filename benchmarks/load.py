"""Load: N concurrent runs over HTTP, what each holds, and whether the server gives its memory back.

`.venv/bin/python benchmarks/load.py [--runs 1000] [--latency 10] [--shape held|background|tasks|all]` starts
`mcp-team serve --http` on the offline model (each model call sleeps `--latency` seconds, so every run is
in flight at once), in a state directory of its own, and loads it in one or all of the ways clients run
many runs:
- held: N sessions (`--sessions`), each with a `run_team` call held open until the answer (the progress of
  the run streams on it), so each run also holds the MCP SDK's streamed request;
- background: 10 clients start N runs with `start_run` (8 calls at a time each), close their sessions at
  once, and follow the runs with `get_run` (a few polls at a time) to their end;
- tasks: the same, the runs started as MCP tasks (`run_team` with `task`, protocol 2025-11-25).
For each it prints:
- how many runs were in flight at once (from the runs' own start and end times);
- idle RSS (after warm-up runs), peak RSS, and per in-flight run: (peak - idle) / most in flight at once
  (target <= 100 KB);
- RSS after the load, once the sessions are closed, the answered streams' 60 s are over and one more
  run has gone through (target: within 10% of idle);
- errors (target 0): a failed HTTP call, a JSON-RPC error, or a run whose status is not `complete`.
RSS is read from /proc/<pid>/status (VmRSS) of the server process, sampled every 50 ms. With `--sdk-baseline`
the held calls are also made to a one-tool `MCPServer` whose tool only sleeps (benchmarks/bare_http_server.py):
what the MCP SDK and uvicorn hold for such a call, and so mcp-team's own share of a held run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import httpx2

TARGET_KB_PER_RUN = 100
TARGET_RETURN = 0.10
LEGACY, MODERN = "2025-11-25", "2026-07-28"
PROTOCOL = LEGACY  # --protocol: the revision every client of the run speaks
REQUEST = "Research bees"
BACKGROUND_SESSIONS = 10
CALLS_AT_ONCE = 8  # start_run and get_run calls at once on a session (--start-run)
Outcome = dict[str, Any] | str  # a tool's structured result, or what went wrong
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _messages(body: str) -> list[dict[str, Any]]:
    """JSON-RPC messages of an SSE (or JSON) response body."""
    if body.lstrip().startswith("{"):
        return [json.loads(body)]
    out = []
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


class Counter:
    """How many runs have sent their `run_team` call; `all_called` is set when all `runs` have."""

    def __init__(self, runs: int) -> None:
        self.n, self.runs = 0, runs
        self.all_called = asyncio.Event()

    def add(self) -> None:
        self.n += 1
        if self.n >= self.runs:
            self.all_called.set()


def running_runs(db: Path) -> int:
    """How many runs the server's run store shows running (0 before its tables exist or while it is busy)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM mcp_team_runs WHERE status = 'running'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


async def snapshot_in_flight(pid: int, db: Path, runs: int, latency: float, in_flight: list[int]) -> None:
    """A tracemalloc snapshot once the server holds every run (or as many as it came to hold at once).

    Counted in the server's run store, not from the client's calls: under tracemalloc the server takes
    seconds to admit a burst, and a snapshot timed from the client caught a fraction of the runs."""
    most, since = 0, time.perf_counter()
    give_up = since + 600  # a server that stores no run at all: the snapshot is taken anyway, and says so
    # Until every run is held, or no new one was admitted for `latency` once some were (then it is the most).
    while most < runs and (most == 0 or time.perf_counter() - since < latency) and time.perf_counter() < give_up:
        await asyncio.sleep(0.25)
        if (now := running_runs(db)) > most:
            most, since = now, time.perf_counter()
    in_flight.append(running_runs(db))
    os.kill(pid, signal.SIGUSR1)


async def open_session(client: httpx2.AsyncClient, url: str) -> dict[str, str] | str:
    """initialize and initialized: the headers of the new session's requests, or what went wrong. On 2026-07-28
    there are no sessions: every request stands alone."""
    if PROTOCOL == MODERN:
        return {**HEADERS, "mcp-protocol-version": MODERN}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}},
    }
    r = await client.post(url, json=init, headers=HEADERS)
    if r.status_code != 200:
        return f"initialize: HTTP {r.status_code}"
    session = r.headers.get("mcp-session-id")
    headers = {**HEADERS, "mcp-protocol-version": PROTOCOL, **({"mcp-session-id": session} if session else {})}
    r = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    if r.status_code not in (200, 202):
        return f"initialized: HTTP {r.status_code}"
    return headers


UNCLOSED: list[str] = []  # sessions the server did not close when asked: an error (they hold memory for 30 min)


async def close_session(client: httpx2.AsyncClient, url: str, headers: dict[str, str]) -> None:
    if "mcp-session-id" in headers:
        try:
            r = await client.delete(url, headers=headers)
        except httpx2.HTTPError as exc:
            UNCLOSED.append(f"closing a session: {type(exc).__name__}: {exc}")
        else:
            if r.status_code >= 300:
                UNCLOSED.append(f"closing a session: HTTP {r.status_code}")


async def tools_call(
    client: httpx2.AsyncClient, url: str, headers: dict[str, str], call_id: int, params: dict[str, Any]
) -> dict[str, Any] | str:
    """One `tools/call` with `params`: its JSON-RPC result, or what went wrong."""
    if PROTOCOL == MODERN:  # what each request carries instead of a session, and its routing headers
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        params = {**params, "_meta": meta}
        headers = {**headers, "mcp-method": "tools/call", "mcp-name": params["name"]}
    r = await client.post(url, json={"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": params},
                          headers=headers)  # fmt: skip
    if r.status_code != 200:
        return f"{params['name']}: HTTP {r.status_code}"
    reply = next((m for m in _messages(r.text) if m.get("id") == call_id), None)
    if reply is None or "error" in reply:
        return f"{params['name']}: {reply and reply.get('error')}"
    return dict(reply["result"])


async def call_tool(
    client: httpx2.AsyncClient, url: str, headers: dict[str, str], call_id: int, name: str, arguments: dict[str, Any]
) -> Outcome:
    """One `tools/call`: its structured result, or what went wrong."""
    result = await tools_call(client, url, headers, call_id, {"name": name, "arguments": arguments})
    if isinstance(result, str):
        return result
    if result.get("isError"):
        return f"{name}: {result.get('content')}"
    return dict(result.get("structuredContent") or {})


async def session_runs(
    client: httpx2.AsyncClient, url: str, runs: int, calling: Counter | None = None
) -> list[Outcome]:
    """One session (as one client would open) with `runs` concurrent `run_team` calls on it, then closed."""
    headers = await open_session(client, url)
    if isinstance(headers, str):
        return [headers] * runs
    try:

        async def run_team(call_id: int) -> Outcome:
            if calling is not None:
                calling.add()
            return await call_tool(client, url, headers, call_id, "run_team", {"request": REQUEST})

        return list(await asyncio.gather(*(run_team(2 + i) for i in range(runs))))
    finally:
        await close_session(client, url, headers)


async def start_task(client: httpx2.AsyncClient, url: str, headers: dict[str, str], call_id: int) -> Outcome:
    """A `run_team` call made an MCP task (2025-11-25: `task` in its params): `{"run_id": <task id>}` (a task's
    id is its run's), or what went wrong."""
    params = {"name": "run_team", "arguments": {"request": REQUEST}, "task": {"ttl": 600_000}}
    result = await tools_call(client, url, headers, call_id, params)
    if isinstance(result, str) or "task" not in result:
        return f"run_team as a task: {result}"
    return {"run_id": result["task"]["taskId"]}


async def started_runs(
    client: httpx2.AsyncClient, url: str, runs: int, calling: Counter, as_tasks: bool
) -> list[Outcome]:
    """One session that starts `runs` background runs (`start_run`, or `run_team` as MCP tasks), a few at a time,
    and closes."""
    headers = await open_session(client, url)
    if isinstance(headers, str):
        return [headers] * runs
    gate = asyncio.Semaphore(CALLS_AT_ONCE)  # calls held open together would be counted as the runs' memory
    try:

        async def start(call_id: int) -> Outcome:
            async with gate:
                if as_tasks:
                    answer = await start_task(client, url, headers, call_id)
                else:
                    answer = await call_tool(client, url, headers, call_id, "start_run", {"request": REQUEST})
            calling.add()
            return answer

        return list(await asyncio.gather(*(start(2 + i) for i in range(runs))))
    finally:
        await close_session(client, url, headers)


async def settled_runs(client: httpx2.AsyncClient, url: str, run_ids: list[str]) -> list[Outcome]:
    """Poll `get_run` (on one session, every second, a few at a time) until every run has ended."""
    headers = await open_session(client, url)
    if isinstance(headers, str):
        return [headers] * len(run_ids)
    ended: dict[str, Outcome] = {}
    gate = asyncio.Semaphore(CALLS_AT_ONCE)

    async def poll(call_id: int, run_id: str) -> Outcome:
        async with gate:
            return await call_tool(client, url, headers, call_id, "get_run", {"run_id": run_id})

    try:
        while len(ended) < len(run_ids):
            await asyncio.sleep(1.0)
            pending = [r for r in run_ids if r not in ended]
            views = await asyncio.gather(*(poll(i, r) for i, r in enumerate(pending)))
            ended |= {
                r: v for r, v in zip(pending, views, strict=True) if isinstance(v, str) or v["status"] != "running"
            }
    finally:
        await close_session(client, url, headers)
    return [ended[r] for r in run_ids]


async def background_runs(
    client: httpx2.AsyncClient, url: str, runs: int, sessions: int, calling: Counter, as_tasks: bool
) -> list[Outcome]:
    """`runs` background runs started over `sessions` sessions that close at once, then followed to their end."""
    shares = [runs // sessions + (i < runs % sessions) for i in range(sessions)]
    starting = (started_runs(client, url, n, calling, as_tasks) for n in shares)
    started = [o for out in await asyncio.gather(*starting) for o in out]
    failed: list[Outcome] = [o for o in started if isinstance(o, str)]
    return failed + await settled_runs(client, url, [o["run_id"] for o in started if not isinstance(o, str)])


def failure(outcome: Outcome) -> str | None:
    """What went wrong with a run, or None when it completed."""
    if isinstance(outcome, str):
        return outcome
    return None if outcome.get("status") == "complete" else f"run: status {outcome.get('status')!r}"


def most_at_once(outcomes: list[Outcome]) -> int:
    """The most runs in flight at one moment, from the runs' own start and end times."""
    edges = sorted(
        (datetime.fromisoformat(o[key]), step)
        for o in outcomes
        if not isinstance(o, str) and o.get("started_at") and o.get("ended_at")
        for key, step in (("started_at", 1), ("ended_at", -1))
    )
    most = now = 0
    for _, step in edges:  # an end sorts before a start at the same instant: they did not overlap
        now += step
        most = max(most, now)
    return most


async def one_run(client: httpx2.AsyncClient, url: str) -> str | None:
    """A session with one run: None when it worked, else what went wrong."""
    return failure((await session_runs(client, url, 1))[0])


async def sample(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss_kib(pid))
        await asyncio.sleep(0.05)


async def load(
    url: str, pid: int, db: Path, runs: int, sessions: int, latency: float, snapshots: bool, shape: str
) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=runs + 10, max_keepalive_connections=0)
    async with httpx2.AsyncClient(timeout=600, limits=limits) as client:
        for _ in range(3):  # warm-up: lazy imports, caches
            if (err := await one_run(client, url)) is not None:
                raise RuntimeError(f"warm-up run failed: {err}")
        await asyncio.sleep(1.0)
        if snapshots:
            os.kill(pid, signal.SIGUSR1)  # tracing starts now, at idle
            await asyncio.sleep(3)
        idle = rss_kib(pid)
        peak, stop = [idle], asyncio.Event()
        sampler = asyncio.create_task(sample(pid, peak, stop))
        t0 = time.perf_counter()
        calling = Counter(runs)
        in_flight: list[int] = []  # runs the server held when the snapshot was taken
        snapshot = asyncio.create_task(snapshot_in_flight(pid, db, runs, latency, in_flight)) if snapshots else None
        if shape in ("background", "tasks"):
            outcomes = await background_runs(client, url, runs, sessions, calling, as_tasks=shape == "tasks")
        else:
            shares = [runs // sessions + (i < runs % sessions) for i in range(sessions)]
            per_session = await asyncio.gather(*(session_runs(client, url, n, calling) for n in shares))
            outcomes = [o for out in per_session for o in out]
        wall = time.perf_counter() - t0
        if snapshot is not None:
            await snapshot
        stop.set()
        await sampler
        errors = [e for e in map(failure, outcomes) if e is not None] + UNCLOSED
        # Answered streams are kept FINISHED_KEEP_SECONDS (60 s) for a client to resume, and dropped when the
        # next event is stored: wait that long, then one run, as the next client's would.
        await asyncio.sleep(62.0)
        if (err := await one_run(client, url)) is not None:
            errors.append(f"the run after the load: {err}")
        await asyncio.sleep(1.0)
        if snapshots:
            os.kill(pid, signal.SIGUSR1)  # what is still held after the load
            await asyncio.sleep(5)
    after = rss_kib(pid)
    return {
        "idle": idle,
        "peak": peak[0],
        "after": after,
        "errors": errors,
        "wall": wall,
        "at_once": most_at_once(outcomes),
        "in_flight_at_snapshot": in_flight[0] if in_flight else 0,
    }


def wait_healthy(port: int, proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            raise RuntimeError(f"the server did not start: {log.read().decode(errors='replace')[-500:]}")
        time.sleep(0.1)


SHAPES = {
    "held": "each run a `run_team` call held open until its answer (progress streamed on it)",
    "background": f"runs started with `start_run`, {CALLS_AT_ONCE} calls at a time per session, the sessions closed "
    "at once, then followed with `get_run`",
    "tasks": f"runs started as MCP tasks (`run_team` with `task`, 2025-11-25), {CALLS_AT_ONCE} calls at a time per "
    "session, the sessions closed at once, then followed with `get_run`",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument(
        "--shape",
        choices=[*SHAPES, "all"],
        default="all",
        help="how clients run them: held (`run_team` calls), background (`start_run`), tasks (`run_team` as MCP "
        "tasks), or all three (default)",
    )
    parser.add_argument(
        "--sessions",
        type=int,
        help="MCP sessions the runs are started over (held: default one per run, as that many clients would "
        f"open; fewer leave out a session's own cost. background, tasks: default {BACKGROUND_SESSIONS})",
    )
    parser.add_argument(
        "--protocol",
        choices=[LEGACY, MODERN],
        default=LEGACY,
        help=f"the revision the clients speak (default {LEGACY}, with sessions; {MODERN} has none; tasks: "
        f"{LEGACY} only)",
    )
    parser.add_argument("--latency", type=float, default=10.0, help="seconds per offline model call")
    parser.add_argument(
        "--sdk-baseline",
        action="store_true",
        help="held shape: also load a one-tool MCPServer (benchmarks/bare_http_server.py) with the same held calls, "
        "and print what the MCP SDK alone holds per call beside mcp-team's figure",
    )
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="DIR",
        help="run the server under tracemalloc (benchmarks/traced_server.py); prints where memory goes, in flight "
        "and after the load (snapshots in DIR/SHAPE)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N processes spinning on the CPU while each shape runs: a server starved of CPU, which admits a "
        "burst slowly (7 on 2 cores: the held shape's memory stayed +70-150%% of idle after the load, 2026-11-27)",
    )
    args = parser.parse_args()
    if args.sessions is not None and not 1 <= args.sessions <= args.runs:
        parser.error(f"--sessions must be between 1 and --runs ({args.runs}), not {args.sessions}")
    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    global PROTOCOL
    PROTOCOL = args.protocol
    if PROTOCOL == MODERN and "tasks" in shapes:
        if args.shape == "tasks":
            parser.error(f"--shape tasks starts MCP tasks the {LEGACY} way: use --protocol {LEGACY}")
        shapes.remove("tasks")
    failed = False
    for shape in shapes:
        snapshots = args.tracemalloc / shape if args.tracemalloc else None
        n_sessions = args.sessions or (args.runs if shape == "held" else min(BACKGROUND_SESSIONS, args.runs))
        with busy_processes(args.busy):
            out = serve_and_load(args.runs, n_sessions, args.latency, shape, snapshots)
        failed |= report(out, args.runs, n_sessions, args.latency, shape)
        if args.sdk_baseline and shape == "held":
            failed |= report_baseline(out, sdk_baseline(args.runs, n_sessions, args.latency))
        if snapshots:
            report_snapshots(snapshots, out["in_flight_at_snapshot"])
    return 1 if failed else 0


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[None]:
    """`n` processes that only spin on the CPU, for as long as the block runs."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in spinning:
            proc.kill()
            proc.wait()


# glibc's malloc without per-thread caches, two arenas: a served process gives a burst's memory back (after 1,000
# runs: +6% of idle RSS, against +104% on Python's own allocator). An operator sets it in the unit or container.
OPERATOR_ALLOCATOR = {
    "PYTHONMALLOC": "malloc",
    "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=2",
}


def serve_and_load(runs: int, sessions: int, latency: float, shape: str, snapshots: Path | None) -> dict[str, Any]:
    """Start `mcp-team serve --http` (under tracemalloc when `snapshots` is a directory), load it, stop it."""
    port = free_port()
    env = {
        **os.environ,
        "MCP_TEAM_MODEL": "offline",
        "MCP_TEAM_OFFLINE_LATENCY_MS": str(int(latency * 1000)),
        "MCP_TEAM_MAX_RUNS": str(runs + 10),
        "MCP_TEAM_MAX_CONCURRENCY": str(4 * runs),
        **OPERATOR_ALLOCATOR,  # what docs/operating.md advises for a served HTTP process (unless set already)
        **{k: os.environ[k] for k in OPERATOR_ALLOCATOR if k in os.environ},
    }
    exe = Path(sys.executable).with_name("mcp-team")
    cmd = [sys.executable, str(Path(__file__).with_name("traced_server.py"))] if snapshots else [str(exe)]
    if snapshots:
        env["TRACEMALLOC_DIR"] = str(snapshots)
        snapshots.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryFile() as log:
        # A file, not a pipe: a pipe nobody reads blocks a server that logs. Runs are kept in a state directory
        # of their own, so every shape starts from an empty store.
        env["MCP_TEAM_STATE_DIR"] = state
        proc = subprocess.Popen(
            [*cmd, "serve", "--http", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            wait_healthy(port, proc, log)
            return asyncio.run(
                load(url, proc.pid, Path(state) / "runs.sqlite", runs, sessions, latency, snapshots is not None, shape)
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def sdk_baseline(runs: int, sessions: int, latency: float) -> dict[str, Any]:
    """The held shape against a one-tool `MCPServer` whose tool only sleeps (as long as a run of 3 model calls):
    the memory the SDK and uvicorn hold for a `tools/call` left open."""
    port = free_port()
    script = Path(__file__).with_name("bare_http_server.py")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(port), str(3 * latency)], stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            wait_healthy(port, proc, log)
            return asyncio.run(baseline_load(f"http://127.0.0.1:{port}/mcp", proc.pid, runs, sessions))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


async def baseline_load(url: str, pid: int, runs: int, sessions: int) -> dict[str, Any]:
    limits = httpx2.Limits(max_connections=runs + 10, max_keepalive_connections=0)
    async with httpx2.AsyncClient(timeout=600, limits=limits) as client:
        for _ in range(3):  # warm-up, as for mcp-team
            if (err := await one_run(client, url)) is not None:
                raise RuntimeError(f"baseline warm-up call failed: {err}")
        await asyncio.sleep(1.0)
        idle = rss_kib(pid)
        peak, stop = [idle], asyncio.Event()
        sampler = asyncio.create_task(sample(pid, peak, stop))
        shares = [runs // sessions + (i < runs % sessions) for i in range(sessions)]
        outcomes = [o for out in await asyncio.gather(*(session_runs(client, url, n) for n in shares)) for o in out]
        stop.set()
        await sampler
    errors = [e for e in map(failure, outcomes) if e is not None]
    return {"idle": idle, "peak": peak[0], "errors": errors, "at_once": most_at_once(outcomes)}


def report_baseline(out: dict[str, Any], bare: dict[str, Any]) -> bool:
    """Print the SDK's own share of a held run beside mcp-team's; True when a baseline call failed."""
    ours = (out["peak"] - out["idle"]) / max(out["at_once"], 1)
    sdk = (bare["peak"] - bare["idle"]) / max(bare["at_once"], 1)
    print(f"   the MCP SDK alone (a one-tool MCPServer, the same held calls, {bare['at_once']} at once): {sdk:.0f} KiB "
          f"a call (RSS idle {bare['idle'] / 1024:.1f} MiB); mcp-team's own share of a held run: {ours - sdk:.0f} KiB; "
          f"errors {len(bare['errors'])}")  # fmt: skip
    return bool(bare["errors"])


def report(out: dict[str, Any], runs: int, sessions: int, latency: float, shape: str) -> bool:
    """Print one shape's figures; True when a run failed."""
    idle, peak, after, errors = out["idle"], out["peak"], out["after"], out["errors"]
    per_run = (peak - idle) / max(out["at_once"], 1)  # the peak is what the runs in flight together held
    back = (after - idle) / idle
    over = f"{sessions} MCP sessions" if PROTOCOL == LEGACY else f"{sessions} clients, {MODERN} (no sessions)"
    print(f"Load, {shape}: {runs} concurrent runs over HTTP on {over} (serve --http, offline model, "
          f"{latency:g} s per call): {SHAPES[shape]}")  # fmt: skip
    print(f"   wall {out['wall']:.1f} s for all runs, at most {out['at_once']} of them in flight at once; "
          f"errors {len(errors)} (target 0)")  # fmt: skip
    for err in sorted(set(errors))[:5]:
        print(f"     e.g. {err}")
    if out["at_once"] < runs:
        print(f"   NOTE: not all {runs} runs were in flight together; a longer --latency makes them")
    print(f"   RSS idle {idle / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, after {after / 1024:.1f} MiB")
    ok_run = per_run <= TARGET_KB_PER_RUN
    ok_back = back <= TARGET_RETURN
    print(f"   per in-flight run {per_run:.0f} KiB (target <= {TARGET_KB_PER_RUN}): {'PASS' if ok_run else 'FAIL'}")
    print(f"   after the load {back:+.1%} of idle (target <= +{TARGET_RETURN:.0%}): {'PASS' if ok_back else 'FAIL'}")
    return bool(errors)


def report_snapshots(directory: Path, in_flight: int) -> None:
    """Where the Python objects allocated since idle are, with `in_flight` runs held (at the first snapshot)."""
    import tracemalloc

    for name, what in (("snap2.bin", "in flight"), ("snap3.bin", "after the load")):
        path = directory / name
        if not path.exists():
            print(f"   tracemalloc: no snapshot {what} ({path})")
            continue
        stats = tracemalloc.Snapshot.load(str(path)).statistics("lineno")
        total = sum(s.size for s in stats)
        held = ""
        if name == "snap2.bin" and in_flight:
            held = f", {in_flight} runs in flight: {total / 1024 / in_flight:.0f} KiB a run"
        print(f"   tracemalloc, {what}: {total / 1024:.0f} KiB of Python objects since idle{held}, top sites:")
        for stat in stats[:8]:
            frame = stat.traceback[0]
            where = frame.filename.split("site-packages/")[-1].split("/src/")[-1]
            print(f"     {stat.size / 1024:8.0f} KiB {stat.count:7d} blocks  {where}:{frame.lineno}")


if __name__ == "__main__":
    sys.exit(main())
