"""A cancel left half done is finished by cancelling again. Cancelling a run another process runs is two writes:
the run's record (cancelled), then its DBOS workflow. When the second fails (a locked database, the canceller
killed in between), a live process running the run finishes it itself (tests/runs/test_cancel_lost.py). When none
does, a restart does not run such a workflow again, and cancelling again with `mcp-team runs cancel` cancels it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest
from support import HANG_GUARD, stored_runs
from support.durable_engine import FakeEngine
from support.half_cancels import FIRST_REASON, cancel_record_only, cancel_with_the_cli, workflow_status

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


async def test_a_restart_does_not_run_a_workflow_whose_record_says_cancelled(tmp_path: Path) -> None:
    """The other way a half-done cancel could spend model calls: DBOS resumes the pending workflow at the next
    start. The run service finds its record finished and returns what it recorded, calling no model."""
    config = resolve(state_dir=tmp_path, environ={})
    async with open_runs(config, FakeEngine(k=2, steps=2, latency=3600.0)) as runs:
        # closing leaves it pending, to resume at the next start
        await runs.start(RunRequest(request="a request"), run_id="run-c")
    assert config.sqlite_path is not None
    half = await cancel_record_only(config.sqlite_path, "run-c")
    assert workflow_status(config.sqlite_path, "run-c") == "PENDING"

    engine = FakeEngine(k=2, steps=2)
    async with open_runs(config, engine) as runs:
        with anyio.fail_after(HANG_GUARD):
            # DBOS re-enqueues it at launch, then runs it: polled, as DBOS writes its state
            while workflow_status(config.sqlite_path, "run-c") in ("PENDING", "ENQUEUED") or runs.running:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert engine.calls == 0
        record = await runs.get("run-c")
        assert record is not None and (record.status, record.reason) == ("cancelled", FIRST_REASON)
        assert record.model_dump(mode="json")["updated_at"] == half["updated_at"]  # left as the cancel wrote it
        # Its workflow ended with the recorded result: cancelling again touches neither.
        assert await runs.cancel("run-c") == record
    assert workflow_status(config.sqlite_path, "run-c") == "SUCCESS"


async def test_a_cancel_whose_workflow_the_database_refused_says_so_and_cancelling_again_finishes_it(
    tmp_path: Path,
) -> None:
    config = resolve(state_dir=tmp_path, environ={})
    async with open_runs(config, FakeEngine(k=2, steps=2, latency=3600.0)) as runs:
        # closing leaves it pending, to resume at the next start
        await runs.start(RunRequest(request="a request"), run_id="run-r")
    db = config.sqlite_path
    assert db is not None
    with sqlite3.connect(db) as conn:  # DBOS's half of a cancel fails, the run store's does not
        conn.execute("CREATE TRIGGER refuse_cancel BEFORE UPDATE OF status ON workflow_status "
                     "WHEN NEW.status = 'CANCELLED' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")  # fmt: skip

    refused = cancel_with_the_cli(tmp_path, "run-r")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused
    assert "run run-r is recorded cancelled, but the runs database refused to cancel its workflow" in refused.stderr
    assert "Run 'mcp-team runs cancel run-r' again" in refused.stderr
    assert [r["status"] for r in stored_runs(db)] == ["cancelled"]
    # No process ran it to hand over its result: the record says how it ended, not "" (`runs show` printed that).
    assert [r["result"]["answer"] for r in stored_runs(db)] == [
        "The run was cancelled. No specialist finished any work, so there is no answer."
    ]
    assert workflow_status(db, "run-r") == "PENDING"

    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER refuse_cancel")
    done = cancel_with_the_cli(tmp_path, "run-r")
    assert (done.returncode, done.stderr) == (0, "mcp-team: run run-r cancelled\n"), done
    assert workflow_status(db, "run-r") == "CANCELLED"
    [record] = stored_runs(db)
    assert (record["status"], record["reason"]) == ("cancelled", FIRST_REASON)
