"""Load: N concurrent runs over HTTP, and whether the server gives its memory back.

`.venv/bin/python benchmarks/load.py [--runs 1000] [--latency 2]` starts `mcp-team serve --http` on the
offline model (each model call sleeps `--latency` seconds, so every run is in flight at once), opens
N MCP sessions over streamable HTTP, calls `run_team` on all of them at once, and prints:
- idle RSS (after a warm-up run), peak RSS, and per in-flight run: (peak - idle) / N (target <= 100 KB);
- RSS after the load, once the sessions are closed, the answered streams' 60 s are over and one more
  run has gone through (target: within 10% of idle);
- errors (target 0): a failed HTTP call, a JSON-RPC error, or a run whose status is not `complete`.
RSS is read from /proc/<pid>/status (VmRSS) of the server process, sampled every 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import httpx2

TARGET_KB_PER_RUN = 100
TARGET_RETURN = 0.10
PROTOCOL = "2025-11-25"
REQUEST = "Research bees"
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


async def snapshot_in_flight(pid: int, calling: Counter, latency: float) -> None:
    """A tracemalloc snapshot while every run is in flight (all called, none answered yet)."""
    await calling.all_called.wait()
    await asyncio.sleep(latency / 2)
    os.kill(pid, signal.SIGUSR1)


async def one_run(client: httpx2.AsyncClient, url: str, calling: Counter | None = None) -> str | None:
    """initialize, initialized, run_team, close the session; None when it worked, else what went wrong."""
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
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "run_team", "arguments": {"request": REQUEST}},
    }
    if calling is not None:
        calling.add()
    try:
        r = await client.post(url, json=call, headers=headers)
        if r.status_code != 200:
            return f"run_team: HTTP {r.status_code}"
        reply = next((m for m in _messages(r.text) if m.get("id") == 2), None)
        if reply is None or "error" in reply:
            return f"run_team: {reply and reply.get('error')}"
        result = reply["result"]
        status = (result.get("structuredContent") or {}).get("status")
        if result.get("isError") or status != "complete":
            return f"run_team: status {status!r}"
        return None
    finally:
        if session:
            await client.delete(url, headers=headers)


async def sample(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], rss_kib(pid))
        await asyncio.sleep(0.05)


async def load(url: str, pid: int, runs: int, latency: float, snapshots: bool) -> dict[str, Any]:
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
        snapshot = asyncio.create_task(snapshot_in_flight(pid, calling, latency)) if snapshots else None
        outcomes = await asyncio.gather(*(one_run(client, url, calling) for _ in range(runs)), return_exceptions=True)
        wall = time.perf_counter() - t0
        if snapshot is not None:
            await snapshot
        stop.set()
        await sampler
        errors = [o if isinstance(o, str) else f"{type(o).__name__}: {o}" for o in outcomes if o is not None]
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
    return {"idle": idle, "peak": peak[0], "after": after, "errors": errors, "wall": wall}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per offline model call")
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="DIR",
        help="run the server under tracemalloc (benchmarks/traced_server.py); prints where memory goes, in flight "
        "and after the load (snapshots in DIR)",
    )
    args = parser.parse_args()
    port = free_port()
    env = {
        **os.environ,
        "MCP_TEAM_MODEL": "offline",
        "MCP_TEAM_OFFLINE_LATENCY_MS": str(int(args.latency * 1000)),
        "MCP_TEAM_MAX_RUNS": str(args.runs + 10),
        "MCP_TEAM_MAX_CONCURRENCY": str(4 * args.runs),
    }
    exe = Path(sys.executable).with_name("mcp-team")
    cmd = [sys.executable, str(Path(__file__).with_name("traced_server.py"))] if args.tracemalloc else [str(exe)]
    if args.tracemalloc:
        env["TRACEMALLOC_DIR"] = str(args.tracemalloc)
        args.tracemalloc.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a pipe nobody reads blocks a server that logs
        proc = subprocess.Popen(
            [*cmd, "serve", "--http", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            wait_healthy(port, proc, log)
            out = asyncio.run(load(url, proc.pid, args.runs, args.latency, snapshots=args.tracemalloc is not None))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    idle, peak, after, errors = out["idle"], out["peak"], out["after"], out["errors"]
    per_run = (peak - idle) / args.runs
    back = (after - idle) / idle
    print(f"Load: {args.runs} concurrent runs over HTTP (serve --http, offline model, {args.latency:g} s per call)")
    print(f"   wall {out['wall']:.1f} s for all runs; errors {len(errors)} (target 0)")
    for err in sorted(set(errors))[:5]:
        print(f"     e.g. {err}")
    print(f"   RSS idle {idle / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, after {after / 1024:.1f} MiB")
    ok_run = per_run <= TARGET_KB_PER_RUN
    ok_back = back <= TARGET_RETURN
    print(f"   per in-flight run {per_run:.0f} KiB (target <= {TARGET_KB_PER_RUN}): {'PASS' if ok_run else 'FAIL'}")
    print(f"   after the load {back:+.1%} of idle (target <= +{TARGET_RETURN:.0%}): {'PASS' if ok_back else 'FAIL'}")
    if args.tracemalloc:
        report_snapshots(args.tracemalloc)
    return 1 if errors else 0


def report_snapshots(directory: Path) -> None:
    import tracemalloc

    for name, what in (("snap2.bin", "in flight"), ("snap3.bin", "after the load")):
        path = directory / name
        if not path.exists():
            print(f"   tracemalloc: no snapshot {what} ({path})")
            continue
        stats = tracemalloc.Snapshot.load(str(path)).statistics("lineno")
        total = sum(s.size for s in stats)
        print(f"   tracemalloc, {what}: {total / 1024:.0f} KiB of Python objects allocated since idle, top sites:")
        for stat in stats[:8]:
            frame = stat.traceback[0]
            where = frame.filename.split("site-packages/")[-1].split("/src/")[-1]
            print(f"     {stat.size / 1024:8.0f} KiB {stat.count:7d} blocks  {where}:{frame.lineno}")


if __name__ == "__main__":
    sys.exit(main())
