"""A cancel left half done is not lost. Cancelling a run another process runs is two writes: the run's record
(cancelled), then its DBOS workflow. When the second never happens (the canceller killed in between, or the
database refused it), the process running the run sees the record in its cancellation watch: it stops the run,
keeping the canceller's reason, and cancels the workflow itself. A run that ends before it sees the cancel does
not overwrite the cancelled record. `cancel_run` whose workflow cancel the database refuses says so in one line."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.database import sqlite_engine
from mcp_team.runs.records import Progress
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.types import RunRecord, RunRequest, now
from support import HANG_GUARD, stored_runs
from support.durable_engine import FakeEngine
from support.half_cancels import (
    FIRST_REASON,
    cancel_record_only,
    cancel_with_the_cli,
    rewritten,
    serve_run,
    until,
    waiting_at,
    workflow_status,
)

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.slow]

REFUSE_CANCEL = ("CREATE TRIGGER refuse_cancel BEFORE UPDATE OF status ON workflow_status "
                 "WHEN NEW.status = 'CANCELLED' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")  # fmt: skip


async def test_a_run_whose_cancel_reached_only_its_record_stops_and_its_workflow_is_cancelled(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    serving = serve_run(tmp_path)  # the run waits for a person: it cannot end on its own, however slow the machine
    try:
        run_id = await until(serving, "the run at its first checkpoint", lambda: waiting_at(db, "before:writer"))
        half = await cancel_record_only(db, run_id)
        assert workflow_status(db, run_id) == "PENDING"

        # Nobody cancels again: the process running it stops it, writing what had finished, with the reason.
        final = await until(serving, "the run's end", lambda: rewritten(db, half))
        assert (final["status"], final["reason"]) == ("cancelled", FIRST_REASON), final
        assert final["result"]["status"] == "cancelled" and final["waiting"] is None, final
        assert "running" not in {h["status"] for h in final["result"]["handoffs"]}, final["result"]["handoffs"]
        # and finishes DBOS's half: a restart does not resume it
        await until(serving, "its workflow cancelled", lambda: workflow_status(db, run_id) == "CANCELLED")
        assert serving.poll() is None  # the server serves on

        again = cancel_with_the_cli(tmp_path, run_id)
        ended = f"mcp-team: run {run_id} had already ended (cancelled); nothing to cancel\n"
        assert (again.returncode, again.stderr) == (0, ended), again
    finally:
        serving.kill()
        serving.communicate()


@pytest.mark.parametrize("resumable", [True, False])
async def test_the_run_service_stops_a_run_recorded_cancelled_by_another_process(
    tmp_path: Path, resumable: bool
) -> None:
    """The same through the library: a run of this process (durable, or one that cannot resume, which has no
    workflow for another process to cancel) whose record another process wrote cancelled."""
    config = resolve(state_dir=tmp_path, environ={})
    assert config.sqlite_path is not None
    engine = FakeEngine(k=2, steps=2, latency=3600.0)  # its model calls never return: only a cancel ends it
    async with open_runs(config, engine) as runs:
        await runs.start(RunRequest(request="a request"), run_id="run-x", resumable=resumable)
        half = await cancel_record_only(config.sqlite_path, "run-x")
        with anyio.fail_after(HANG_GUARD):
            while runs.running:  # noqa: ASYNC110 (polled: the watch's period is the thing tested)
                await anyio.sleep(0.05)
        record = await runs.get("run-x")
        assert record is not None and (record.status, record.reason) == ("cancelled", FIRST_REASON)
        assert record.model_dump(mode="json")["updated_at"] != half["updated_at"]  # written by the run's end
        assert engine.calls == 0
    [stored] = stored_runs(config.sqlite_path)
    assert (stored["status"], stored["reason"]) == ("cancelled", FIRST_REASON)
    assert workflow_status(config.sqlite_path, "run-x") == ("CANCELLED" if resumable else None)


async def test_a_run_that_ends_after_another_process_cancelled_it_stays_cancelled(tmp_path: Path) -> None:
    """The process running a run may end it before it sees a cancel written elsewhere: its end is not written
    over the cancel, and a subscriber here waiting for the end is given the cancel."""
    db = tmp_path / "runs.sqlite"
    running, canceller = RunStore(sqlite_engine(str(db))), RunStore(sqlite_engine(str(db)))
    try:
        running.create()
        started = now()
        record = RunRecord(run_id="run-e", status="running", request="r", executor_id="here", resumable=True,
                           workflow_id="run-e", started_at=started, updated_at=started)  # fmt: skip
        await running.write(record)
        seen: list[RunRecord] = []

        async def subscriber() -> None:  # told of this process's writes at once, of others' only at `poll`
            async for changed in running.subscribe("run-e", poll=3600.0, final=True):
                seen.append(changed)

        async with anyio.create_task_group() as tg:
            tg.start_soon(subscriber)
            with anyio.fail_after(HANG_GUARD):
                while not seen:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            assert await canceller.finish_if_running(Progress(record).finish("cancelled", reason=FIRST_REASON))
            await running.write(Progress(record).finish("complete"))  # the run's own end, as `execute` writes it
        assert [(r.status, r.reason) for r in seen] == [("running", None), ("cancelled", FIRST_REASON)]

        for end in ("complete", "failed", "interrupted"):
            await running.write(Progress(record).finish(end))
            got = running.get("run-e")
            assert got is not None and (got.status, got.reason) == ("cancelled", FIRST_REASON), end
        # The cancel's own end (the run stopped, with what had finished) still follows it.
        await running.write(Progress(record).finish("cancelled", reason=FIRST_REASON).model_copy(update={"owner": "o"}))
        [stored] = stored_runs(db)
        assert (stored["status"], stored["owner"]) == ("cancelled", "o")
    finally:
        running.engine.dispose()
        canceller.engine.dispose()


async def test_cancel_run_says_in_one_line_that_a_cancel_the_database_refused_did_not_finish(tmp_path: Path) -> None:
    from mcp import Client

    from mcp_team.llm.settings import ModelSettings
    from mcp_team.server.app import build_server

    db = tmp_path / "runs.sqlite"
    serving = serve_run(tmp_path)
    try:
        run_id = await until(serving, "the run at its first checkpoint", lambda: waiting_at(db, "before:writer"))
        with sqlite3.connect(db) as conn:  # DBOS's half of a cancel fails, the run store's does not
            conn.execute(REFUSE_CANCEL)
        server = build_server(ModelSettings(model="offline"), durable=resolve(state_dir=tmp_path, environ={}))
        async with Client(server) as client:
            refused = await client.call_tool("cancel_run", {"run_id": run_id})
            assert refused.is_error
            assert [c.text for c in refused.content] == [  # type: ignore[union-attr]
                f"Error executing tool cancel_run: run {run_id} is recorded cancelled, but the runs database "
                "refused to cancel its workflow (refused by the test), so the cancel did not finish. Call "
                "cancel_run again once the database is writable"
            ]
            # The process running it stops it all the same: its workflow ends, returning the cancelled record.
            await until(serving, "the run's end", lambda: workflow_status(db, run_id) == "SUCCESS")
            [final] = stored_runs(db)
            assert (final["status"], final["reason"]) == ("cancelled", "cancelled with cancel_run"), final
            assert "running" not in {h["status"] for h in final["result"]["handoffs"]}, final["result"]["handoffs"]
            with sqlite3.connect(db) as conn:
                conn.execute("DROP TRIGGER refuse_cancel")
            again = await client.call_tool("cancel_run", {"run_id": run_id})
            assert not again.is_error and again.structured_content is not None, again.content
            assert again.structured_content["status"] == "cancelled"
        assert serving.poll() is None
    finally:
        serving.kill()
        serving.communicate()


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_tasks_cancel_says_in_one_line_that_a_cancel_the_database_refused_did_not_finish(
    tmp_path: Path, mode: str
) -> None:
    from mcp import Client, MCPError

    from mcp_team.llm.settings import ModelSettings
    from mcp_team.server.app import build_server
    from support.task_client import TaskClient, Tasks  # a run's id is its task's id

    db = tmp_path / "runs.sqlite"
    serving = serve_run(tmp_path)
    try:
        run_id = await until(serving, "the run at its first checkpoint", lambda: waiting_at(db, "before:writer"))
        with sqlite3.connect(db) as conn:
            conn.execute(REFUSE_CANCEL)
        server = build_server(ModelSettings(model="offline"), durable=resolve(state_dir=tmp_path, environ={}))
        async with Client(server, mode=mode, extensions=[Tasks()]) as client:
            with pytest.raises(MCPError) as refused:
                await TaskClient(client, mode).cancel(run_id)
        assert str(refused.value) == (
            f"run {run_id} is recorded cancelled, but the runs database refused to cancel its workflow (refused by "
            "the test), so the cancel did not finish. Send tasks/cancel again once the database is writable"
        )
        await until(serving, "the run's end", lambda: workflow_status(db, run_id) == "SUCCESS")  # stopped all the same
    finally:
        serving.kill()
        serving.communicate()


async def test_a_cancelled_record_this_version_cannot_read_still_counts_as_cancelled(tmp_path: Path) -> None:
    """A record this version cannot read (e.g. a newer version's, of another shape) fails validation: the watch must
    still see the run cancelled (its status column says so), without the reason, and not end on the error."""
    db = tmp_path / "runs.sqlite"
    store = RunStore(sqlite_engine(str(db)))
    try:
        store.create()
        started = now()
        for run_id in ("run-new", "run-old"):
            record = RunRecord(run_id=run_id, status="running", request="r", executor_id="here", resumable=True,
                               workflow_id=run_id, started_at=started, updated_at=started)  # fmt: skip
            await store.write(record)
            assert await store.finish_if_running(Progress(record).finish("cancelled", reason=FIRST_REASON))
        with sqlite3.connect(db) as conn:
            unreadable = "json_set(record, '$.started_at', 'not a time')"
            conn.execute(f"UPDATE mcp_team_runs SET record = {unreadable} WHERE run_id = 'run-new'")
        assert store.cancelled_among(["run-new", "run-old", "run-none"]) == {"run-new": None, "run-old": FIRST_REASON}
    finally:
        store.engine.dispose()
