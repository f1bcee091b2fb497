"""What a restart keeps, what it loses, and how long from restart to resumed (issue 32's note):
`.venv/bin/python benchmarks/restart.py [RUNS] [LATENCY_MS]` (defaults 4 runs, 1000 ms a model call).

A real `mcp-team serve --http` on SQLite with the offline model; RUNS runs started with `start_run`; once each has a
handoff `completed` in `get_run`, the server is killed with SIGKILL and started again on the same state directory.
Printed: from the restart to /healthz answering, to the server saying which runs it resumed, to every run
complete; and per run whether each handoff seen `completed` before the kill kept its id, times and output, and
how many handoffs were under way at the kill (their model calls are made again: a model call in flight is lost).
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.sync_client import Mcp, serve  # noqa: E402

REQUESTS = ["Research bees and write a report", "Research wasps, calculate 12*7 and write a summary",
            "Research ants and write a short note", "Research moths, calculate 3*3 and write a report"]  # fmt: skip
KEPT = ("id", "specialist", "started_at", "finished_at", "output")


def completed(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["id"]: {k: h.get(k) for k in KEPT} for h in record.get("handoffs", []) if h["status"] == "completed"}


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    latency = sys.argv[2] if len(sys.argv) > 2 else "1000"
    tmp = Path(tempfile.mkdtemp(prefix="mcp-team-restart-"))
    state = tmp / "state"
    proc, base = serve(state, tmp / "first.log", "--offline-latency-ms", latency)
    client = Mcp(base)
    ids = [client.call("start_run", request=REQUESTS[i % len(REQUESTS)])["run_id"] for i in range(n)]
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    deadline = time.monotonic() + 120
    while len(seen) < n and time.monotonic() < deadline:  # each run with a handoff completed
        for run_id in ids:
            if run_id not in seen and (done := completed(client.call("get_run", run_id=run_id))):
                seen[run_id] = done
        time.sleep(0.05)
    under_way = {r: sum(h["status"] == "running" for h in client.call("get_run", run_id=r).get("handoffs", []))
                 for r in ids}  # fmt: skip
    seen = {r: completed(client.call("get_run", run_id=r)) for r in ids}  # the last look before the kill
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"{n} runs started, killed with SIGKILL once each had a handoff completed "
          f"({sum(map(len, seen.values()))} completed, {sum(under_way.values())} under way)")  # fmt: skip

    log = tmp / "second.log"
    began = time.monotonic()
    proc, base = serve(state, log, "--offline-latency-ms", latency)
    healthy = time.monotonic() - began
    while "resumed" not in log.read_text() and time.monotonic() - began < 60:
        time.sleep(0.02)
    said = time.monotonic() - began
    client = Mcp(base)
    records = {r: client.call("get_run", run_id=r, wait_seconds=50) for r in ids}
    ended = time.monotonic() - began
    print(f"restart -> /healthz 200: {healthy:.2f} s; -> runs said resumed: {said:.2f} s; "
          f"-> every run ended: {ended:.2f} s (model calls of {latency} ms)")  # fmt: skip
    for line in log.read_text().splitlines():
        if "resumed" in line:
            print("  server:", line.strip())
    kept = 0
    for run_id in ids:
        after = completed(records[run_id])
        same = all(after.get(h) == before for h, before in seen[run_id].items())
        kept += same
        print(f"  {run_id}: {records[run_id]['status']}, {len(seen[run_id])} handoff(s) completed before the kill "
              f"{'kept unchanged' if same else 'CHANGED'}; {under_way[run_id]} under way at the kill, run again; "
              f"its record says resumed {len(records[run_id].get('resumed') or [])} time(s)")  # fmt: skip
    proc.terminate()
    proc.wait(30)
    print(
        f"kept: {kept}/{n} runs' completed handoffs unchanged; a traceback in the log: {'Traceback' in log.read_text()}"
    )
    return 0 if kept == n and all(r["status"] == "complete" for r in records.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
