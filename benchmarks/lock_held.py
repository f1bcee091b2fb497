"""A runs database locked for minutes under a running server: `.venv/bin/python benchmarks/lock_held.py [SECONDS]`

Issue 34's scenario, measured once by hand (it takes as long as the lock is held; 300 s by default, which is why it
is not a test: tests/runs/test_storage_faults.py holds the lock for seconds). A real `mcp-team serve --http` on
SQLite with the offline model at 200 ms a call; one run finished, one pending; another process takes the database
with `BEGIN EXCLUSIVE` for SECONDS. Printed every 30 s: what /healthz and /readyz answer and what `get_run` of the
finished run gets. After the lock is let go: whether the server lived, /readyz, the pending run, a new run, the
finished one, and whether a traceback reached the server's log. It should say: healthz 200 and readyz 503 while
locked, the finished run readable throughout, everything complete after, no traceback.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support import plain_http  # noqa: E402
from support.sync_client import Mcp, serve, status  # noqa: E402


def main() -> int:
    hold = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    tmp = Path(tempfile.mkdtemp(prefix="mcp-team-lock-"))
    state, log = tmp / "state", tmp / "server.log"
    proc, base = serve(state, log, "--offline-latency-ms", "200")
    http = plain_http(timeout=30)
    began = time.monotonic()

    def say(*what: object) -> None:
        print(f"{time.monotonic() - began:7.1f} s", *what, flush=True)

    client = Mcp(base)
    finished = client.finished("Research bees")
    say("a finished run")
    pending = client.call("start_run", request="Research wasps")["run_id"]
    locker = sqlite3.connect(state / "runs.sqlite", isolation_level=None, timeout=30)
    locker.execute("BEGIN EXCLUSIVE")
    say(f"the database locked by another process for {hold:g} s, a run pending")
    end = time.monotonic() + hold
    while time.monotonic() < end and proc.poll() is None:
        read = client.call("get_run", run_id=finished)
        say(f"/healthz {status(http, f'{base}/healthz')}, /readyz {status(http, f'{base}/readyz')},",
            f"get_run of the finished run: {read.get('status') or read.get('error', '')[:100]}")  # fmt: skip
        time.sleep(min(30.0, max(0.0, end - time.monotonic())))
    locker.execute("ROLLBACK")
    locker.close()
    if proc.poll() is not None:
        say(f"the server exited {proc.returncode} while locked:", log.read_text()[-2000:])
        return 1
    say("lock let go; the server lives")
    deadline = time.monotonic() + 60
    while status(http, f"{base}/readyz") != 200 and time.monotonic() < deadline:
        time.sleep(1)
    say("/readyz", status(http, f"{base}/readyz"))
    say("the pending run:", client.call("get_run", run_id=pending, wait_seconds=50).get("status"))
    client.finished("Research ants")
    say("a new run: complete")
    say("the finished run:", client.call("get_run", run_id=finished).get("status"))
    proc.terminate()
    proc.wait(30)
    say("a traceback in the server's log:", "Traceback" in log.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
