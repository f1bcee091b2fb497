"""A cancel from another process (`mcp-team runs cancel`, or a replica's `cancel_run`) writes its cancelled record
only while the stored run still runs: a run that finished in the instant since the canceller read it keeps its
own record, answer included (the cancel used to overwrite it with an empty, cancelled one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from mcp_team.handoffs import HandoffRecord, RunResult, UsageReport
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


def test_a_run_cancelled_before_its_engine_ended_says_so_and_keeps_what_finished() -> None:
    """A run's record finished without the engine's result (cancelled by `mcp-team runs cancel` with no process
    left to run it, or as the engine wound down under load) had the answer "": `mcp-team run` printed an empty
    line as the cancelled run's answer. It says how the run ended, then the results that finished."""
    done = HandoffRecord(id="h1", run_id="r3", target="researcher", call_id="c1", seq=1, task="Find facts about bees",
                         status="completed", started_at=now(), ended_at=now(), output="Bees make honey.")  # fmt: skip
    going = HandoffRecord(id="h2", run_id="r3", target="writer", call_id="c2", seq=2, task="Write it up",
                          started_at=now())  # fmt: skip
    read = running("r3")
    so_far = RunResult(answer="", status="running", handoffs=[done, going], failures=[], usage=_usage(),
                       run_id="r3", trace_id=None, request=read.request, mode="adaptive",
                       started_at=read.started_at)  # fmt: skip
    read = read.model_copy(update={"result": so_far})
    for status, said in [("cancelled", "The run was cancelled."), ("failed", "The run failed.")]:
        result = Progress(read).finish(status, reason="cancelled with mcp-team runs cancel").result
        assert result is not None and result.answer.startswith(said), result
        assert "Bees make honey." in result.answer and "Write it up" not in result.answer, result.answer
    empty = Progress(running("r4")).finish("cancelled").result
    assert empty is not None and empty.answer.startswith("The run was cancelled. No specialist finished any work")
