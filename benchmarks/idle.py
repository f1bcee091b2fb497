"""Idle: what `mcp-team serve` (stdio, durable runs on SQLite, the Claude Desktop set-up) costs while nobody calls it.

`.venv/bin/python benchmarks/idle.py [--seconds 60]` starts the server on the offline model in a state directory of
its own, initializes an MCP session as a client would, waits 10 s for start-up work to end, then reads
`/proc/<pid>/task/*` twice, `--seconds` apart: CPU (user + system) and voluntary context switches (wake-ups) of
each thread, by name. Prints a line per thread that did anything, the whole process's share of one core and its
wake-ups a second. Linux only (/proc). No target: it says what an idle server spends, and on what.
The server is started through a shim that gives each thread the name Python gives it (what it runs, when it runs
a function), as the system sees it (15 characters): Python 3.11 leaves them all "mcp-team".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# Names each thread in the kernel (prctl PR_SET_NAME) as it starts, then runs the `mcp-team` command.
SHIM = """
import ctypes, sys, threading
from mcp_team.cli.main import main
libc, inner = ctypes.CDLL(None), threading.Thread._bootstrap_inner
def named(self):
    name = self.name.split("(")[-1].rstrip(")") if "(" in self.name else self.name
    libc.prctl(15, name.encode()[:15], 0, 0, 0)
    inner(self)
threading.Thread._bootstrap_inner = named
sys.argv[0] = "mcp-team"
sys.exit(main())
"""
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "idle-bench", "version": "1"}}


def threads(pid: int) -> dict[str, tuple[str, int, int]]:
    """Each live thread's (name, CPU ticks, voluntary context switches), by thread id."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:  # ended between the listing and the read
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = next(line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Name:"))
        switches = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("voluntary_ctxt"))
        out[tid] = (name, int(fields[11]) + int(fields[12]), switches)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to watch the idle server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "MCP_TEAM_STATE_DIR": state}
        server = subprocess.Popen(
            [sys.executable, "-c", SHIM, "serve", "--model", "offline"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        assert server.stdin is not None and server.stdout is not None
        try:
            for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            ):
                server.stdin.write(json.dumps(message).encode() + b"\n")
                server.stdin.flush()
            if "result" not in json.loads(server.stdout.readline()):
                sys.exit("the server did not answer initialize")
            time.sleep(10.0)  # start-up work (recovery, the first polls) is not idleness
            before = threads(server.pid)
            time.sleep(args.seconds)
            after = threads(server.pid)
        finally:
            server.kill()
            server.wait()
    print(f"idle `mcp-team serve` (stdio, durable runs on SQLite), {args.seconds:g} s, {len(after)} threads")
    print(f"  {'thread':<36} {'CPU ms':>8} {'wake-ups/s':>11}")
    cpu = wakeups = 0
    for tid, (name, ticks, switches) in sorted(after.items(), key=lambda item: -item[1][1]):
        was = before.get(tid, (name, 0, 0))
        used, woke = ticks - was[1], switches - was[2]
        cpu, wakeups = cpu + used, wakeups + woke
        if used or woke:
            print(f"  {name:<36} {used * 1000 / TICK:8.0f} {woke / args.seconds:11.1f}")
    share = cpu / TICK / args.seconds * 100
    print(f"  whole process: {share:.2f}% of one core, {wakeups / args.seconds:.1f} wake-ups/s")


if __name__ == "__main__":
    main()
