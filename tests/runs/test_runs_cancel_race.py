"""A cancel from another process (`mcp-team runs cancel`, or a replica's `cancel_run`) writes its cancelled record
only while the stored run still runs: a run that finished in the instant since the canceller read it keeps its
own record, answer included (the cancel used to overwrite it with an empty, cancelled one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from mcp_team.handoffs import RunResult, UsageReport
from mcp_team.runs.records import Progress
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.types import RunRecord, now

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    runs = RunStore(sa.create_engine(f"sqlite:///{tmp_path / 'runs.sqlite'}"))
    runs.create()
    return runs


def running(run_id: str) -> RunRecord:
    at = now()
    return RunRecord(run_id=run_id, status="running", request="Research bees", executor_id="a", resumable=True,
                     started_at=at, updated_at=at)  # fmt: skip


def completed(record: RunRecord) -> RunRecord:
    result = RunResult(answer="Bees make honey.", status="complete", handoffs=[], failures=[], usage=_usage(),
                       run_id=record.run_id, trace_id=None, request=record.request, mode="adaptive",
                       started_at=record.started_at, ended_at=now())  # fmt: skip
    return record.model_copy(update={"status": "complete", "result": result, "updated_at": now()})


def _usage() -> UsageReport:
    return UsageReport.model_validate({})


async def test_a_cancel_lands_on_a_running_run(store: RunStore) -> None:
    read = running("r1")
    await store.write(read)
    cancelled = Progress(read).finish("cancelled", reason="cancelled with mcp-team runs cancel")
    assert await store.finish_if_running(cancelled)
    stored = store.get("r1")
    assert stored is not None and stored.status == "cancelled" and stored.reason == cancelled.reason


async def test_a_cancel_read_before_the_run_finished_leaves_its_answer(store: RunStore) -> None:
    read = running("r2")  # what the canceller read
    await store.write(read)
    await store.write(completed(read))  # meanwhile, the process running it finished it
    cancelled = Progress(read).finish("cancelled", reason="cancelled with mcp-team runs cancel")
    assert not await store.finish_if_running(cancelled)
    stored = store.get("r2")
    assert stored is not None and stored.status == "complete"
    assert stored.result is not None and stored.result.answer == "Bees make honey."
