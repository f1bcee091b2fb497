"""Storage faults under a running `mcp-team serve --http` (SQLite, the offline model), as an operator meets them:

- the runs database locked by another process (`BEGIN EXCLUSIVE`) with a run finished and one pending: `/readyz`
  fails while the lock is held and `/healthz` stays 200 (the process is whole); a read of the finished run is
  answered (never queued behind the stuck writer); once the lock is let go, `/readyz` passes, the pending run
  finishes and a new one runs: nothing finished is lost;
- the database deleted, replaced by another file, or damaged under the server: noticed within seconds, the
  server takes no run after, and exits 1 saying why (a supervisor restarts it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import httpx2
import pytest

from support import HANG_GUARD, plain_http
from support.sync_client import Mcp, serve, status, until

pytestmark = [pytest.mark.process]


def test_a_locked_database_fails_readiness_reads_still_answer_and_runs_go_on_after(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "server.log"
    proc, base = serve(state, log, "--offline-latency-ms", "200")
    try:
        client = Mcp(base)
        finished = client.finished("Research bees")
        http = plain_http(timeout=HANG_GUARD)
        until("ready", lambda: status(http, f"{base}/readyz") == 200, proc, log)

        pending = client.call("start_run", request="Research wasps")["run_id"]  # its model calls take 200 ms each
        locker = sqlite3.connect(state / "runs.sqlite", isolation_level=None, timeout=30)
        locker.execute("BEGIN EXCLUSIVE")  # another process holds the write lock, the run in the middle
        try:
            unready = until("/readyz failing", lambda: (r := http.get(f"{base}/readyz")).status_code == 503 and r,
                            proc, log)  # fmt: skip
            assert "cannot be written" in unready.json()["error"] and "locked" in unready.json()["error"]
            assert http.get(f"{base}/healthz").status_code == 200  # alive: a lock is no reason to restart it
            read = client.call("get_run", run_id=finished)  # answered: WAL readers wait for no writer
            assert read.get("status") == "complete", read
            listing = json.loads(client.http.get(f"{base}/runs.json").text)
            assert finished in [r["run_id"] for r in listing["runs"]]
        finally:
            locker.execute("ROLLBACK")
            locker.close()

        until("/readyz passing again", lambda: status(http, f"{base}/readyz") == 200, proc, log)
        assert client.call("get_run", run_id=pending, wait_seconds=50)["status"] == "complete"  # paused, went on
        client.finished("Research ants")
        assert client.call("get_run", run_id=finished)["status"] == "complete"  # nothing finished lost
        assert proc.poll() is None and "Traceback" not in log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_GUARD)


def _delete(db: Path) -> None:
    db.unlink()


def _replace(db: Path) -> None:
    copy = db.with_name("copy.sqlite")
    shutil.copyfile(db, copy)
    os.replace(copy, db)


def _damage(db: Path) -> None:
    with db.open("r+b") as file:  # pages past the first: the header stays, quick_check finds them
        file.seek(4096)
        file.write(os.urandom(4096 * 3))


FAULTS = [(_delete, "was deleted"), (_replace, "was replaced"), (_damage, "is damaged")]


@pytest.mark.parametrize(("fault", "said"), FAULTS, ids=["deleted", "replaced", "damaged"])
def test_a_database_deleted_replaced_or_damaged_is_noticed_and_the_server_exits(
    tmp_path: Path, fault: Any, said: str
) -> None:
    state, log = tmp_path / "state", tmp_path / "server.log"
    proc, base = serve(state, log)
    try:
        client = Mcp(base)
        client.finished("Research bees")  # a run kept before the fault
        fault(state / "runs.sqlite")
        http = plain_http(timeout=HANG_GUARD)
        # Told at once from then on: liveness fails while the process stops (or the port is closed already).
        until("the server noticing", lambda: status(http, f"{base}/healthz") in (503, None), proc, log)
        refused = None
        with contextlib.suppress(httpx2.TransportError, KeyError, IndexError, json.JSONDecodeError):
            refused = client.call("start_run", request="Research ants")  # else: gone already, nothing accepted
        assert refused is None or "error" in refused, refused
        code = proc.wait(timeout=HANG_GUARD)
        text = log.read_text()
        assert code == 1, text
        assert said in text and "stopped:" in text, text
        assert "Traceback" not in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=HANG_GUARD)


@pytest.mark.anyio
async def test_a_write_queued_behind_a_busy_pool_waits_it_out_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The flush of a server whose one pooled connection was held (a write stuck on another process's lock) got
    the pool's TimeoutError, which was not retried: the flush task died and the lifespan with it. Now it waits,
    saying so, and writes once the connection is free."""
    import anyio
    import sqlalchemy as sa

    from mcp_team.runs.records import Progress
    from mcp_team.runs.sql_store import SqlRunStore
    from mcp_team.runs.types import RunRecord

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'runs.sqlite'}", pool_size=1, max_overflow=0, pool_timeout=0.2)
    store = SqlRunStore(engine)
    store.create()
    record = RunRecord.model_validate(
        {"run_id": "r1", "status": "running", "request": "bees", "executor_id": "e", "resumable": False,
         "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
    )  # fmt: skip
    held = engine.connect()  # the pool's one connection, taken
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.write, Progress(record).finish("cancelled", reason="test"))
        with anyio.fail_after(HANG_GUARD):
            while not any("is locked or busy" in r.getMessage() for r in caplog.records):  # noqa: ASYNC110
                await anyio.sleep(0.05)
        held.close()
    stored = store.stored("r1")
    assert stored is not None and stored.status == "cancelled"
    said = next(r.getMessage() for r in caplog.records if "is locked or busy" in r.getMessage())
    assert said.startswith("the runs database cannot be written (it is locked or busy: ") and "retrying in" in said
    store.dispose()


def test_a_database_error_no_wait_fixes_stops_the_server_with_exit_1(tmp_path: Path) -> None:
    """A write the database refuses for good (here a trigger refusing every update of the runs table, as a
    constraint or a schema changed under the server would) ends the run store's background writes: the server
    says why in one line and exits 1, never left half alive (every /mcp request 500, /healthz 200)."""
    state, log = tmp_path / "state", tmp_path / "server.log"
    proc, base = serve(state, log)
    try:
        client = Mcp(base)
        client.finished("Research bees")  # a run kept before the fault
        with sqlite3.connect(state / "runs.sqlite") as conn:
            conn.execute("CREATE TRIGGER refuse BEFORE UPDATE ON mcp_team_runs BEGIN SELECT RAISE(ABORT, 'refused "
                         "by the test'); END")  # fmt: skip
        with contextlib.suppress(httpx2.TransportError, KeyError, IndexError, json.JSONDecodeError):
            client.call("start_run", request="Research ants")  # its progress cannot be written
        http = plain_http(timeout=HANG_GUARD)
        until("/healthz failing", lambda: status(http, f"{base}/healthz") in (503, None), proc, log)
        code = proc.wait(timeout=HANG_GUARD)
        text = log.read_text()
        assert code == 1, text
        assert "the runs database refused a write: IntegrityError: refused by the test" in text, text
        assert "stopped:" in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=HANG_GUARD)
