"""DBOS's step checkpoints, shortened (runs/_dbos_steps.py, issue 9): step outputs that wait for the
database together are committed in one transaction, each caller still getting its own outcome, and a
run's execution reads back only the steps that were recorded. The kill -9 tests (test_runs_replay.py,
test_runs_team_engine.py) prove that replays stay exact; these pin the two shortcuts themselves."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from durable_engine import FakeEngine
from mcp_team.runs import _dbos_steps as steps
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.serializer import JSONSerializer

pytestmark = pytest.mark.anyio

FRESH = 100_000  # step ids no run of FakeEngine reaches


def _output(workflow_id: str, function_id: int, value: str) -> dict[str, Any]:
    serializer = JSONSerializer()
    return {
        "workflow_uuid": workflow_id, "function_id": function_id, "function_name": f"test:{function_id}",
        "output": serializer.serialize(value), "error": None, "serialization": serializer.name(),
        "started_at_epoch_ms": int(time.time() * 1000), "child_workflow_id": None,
    }  # fmt: skip


def _record_together(outputs: list[dict[str, Any]]) -> list[BaseException | None]:
    """Record `outputs` from one thread each while the writer is busy, so they all queue for one commit."""
    group = steps.group_commit()
    assert group is not None
    errors: list[BaseException | None] = [None] * len(outputs)

    def record(i: int) -> None:
        try:
            steps._sys_db().record_operation_result(outputs[i])
        except BaseException as exc:
            errors[i] = exc

    threads = [threading.Thread(target=record, args=(i,)) for i in range(len(outputs))]
    with group.writer:  # another commit in progress
        for t in threads:
            t.start()
        while len(group.queue) < len(outputs):
            time.sleep(0.001)
    for t in threads:
        t.join()
    return errors


async def _finished_run(runs: Any) -> str:
    record = await runs.start("go")
    final = await runs.wait(record.run_id)
    assert final is not None and final.status == "complete", final
    return str(record.run_id)


async def test_outputs_waiting_together_are_committed_in_one_transaction(tmp_path: Path) -> None:
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()) as runs:
        run_id = await _finished_run(runs)
        group = steps.group_commit()
        assert group is not None
        before = group.batches
        errors = await anyio.to_thread.run_sync(
            _record_together, [_output(run_id, FRESH + i, f"v{i}") for i in range(6)]
        )
        assert errors == [None] * 6
        assert group.batches == before + 1
        recorded = await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id)
        assert {FRESH + i for i in range(6)} <= recorded
        step = steps._sys_db().check_operation_execution(run_id, FRESH + 3, f"test:{FRESH + 3}")
        assert step is not None and JSONSerializer().deserialize(step["output"]) == "v3"


async def test_an_output_that_cannot_be_written_fails_its_own_step_only(tmp_path: Path) -> None:
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()) as runs:
        run_id = await _finished_run(runs)
        taken = min(await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id))
        outputs = [_output(run_id, FRESH + 1, "a"), _output(run_id, taken, "again"), _output(run_id, FRESH + 2, "b")]
        errors = await anyio.to_thread.run_sync(_record_together, outputs)
        assert errors[0] is None and errors[2] is None
        assert type(errors[1]).__name__ == "DBOSStepNondeterminismError"  # DBOS's own verdict on a rewrite
        recorded = await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id)
        assert {FRESH + 1, FRESH + 2} <= recorded


async def test_only_recorded_steps_are_read_back(tmp_path: Path) -> None:
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()) as runs:
        run_id = await _finished_run(runs)
        sys_db = steps._sys_db()
        recorded = await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id)
        first = min(recorded)
        with steps.known_steps(run_id, frozenset()):  # as if nothing were recorded: not read at all
            assert sys_db.check_operation_execution(run_id, first, "another-step") is None
        with steps.known_steps(run_id, recorded):  # recorded: read, and its name checked, as DBOS does
            with pytest.raises(Exception) as caught:
                sys_db.check_operation_execution(run_id, first, "another-step")
            assert type(caught.value).__name__ == "DBOSUnexpectedStepError"


class _CancelledWhileWriting:
    """A run whose one model call ends after DBOS cancelled the run, before its output is written (as
    when a cancel lands while a finished step waits for the database): the write is refused."""

    team_hash = "cancelled-while-writing"

    async def run(self, run: Any, runtime: Any, on_event: Any, on_finish: Any) -> Any:
        from dbos import DBOS

        from mcp_team.llm import Message, ModelRequest, ModelResponse, TextBlock
        from mcp_team.runs.runtime import DurableModel

        class Cancelling:
            name, provider = "cancelling", "offline"

            async def complete(self, request: ModelRequest) -> ModelResponse:
                await DBOS.cancel_workflow_async(run.run_id)
                return ModelResponse(content=[TextBlock(text="too late")], model=self.name)

        model = DurableModel(Cancelling(), "specialist")  # type: ignore[arg-type]
        await model.complete(ModelRequest(system="s", messages=[Message(role="user", content="go")]))
        raise AssertionError("the output of a cancelled run's step was written")


async def test_a_run_cancelled_while_a_step_output_waits_is_recorded_cancelled(tmp_path: Path) -> None:
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()) as runs:
        engine = _CancelledWhileWriting()
        record = await runs.start("go", run_id="run-w", engine=engine)  # type: ignore[arg-type]
        final = await runs.wait(record.run_id, timeout=30)
        assert final is not None and final.status == "cancelled", (final.status, final.reason)


async def test_steps_on_the_event_loop_get_their_own_outcome_from_one_batch(tmp_path: Path) -> None:
    """`record_async` (a step's write, without a thread hop): outputs queued together are serialized and
    committed by the writer thread in one go, and each step learns only its own failure: a row that
    cannot be written, a value that cannot be serialized."""
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()) as runs:
        run_id = await _finished_run(runs)
        group = steps.group_commit()
        assert group is not None
        taken = min(await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id))
        serializer = JSONSerializer()

        def serialized(value: str) -> Any:
            return lambda: (serializer.serialize(value), serializer.name())

        def unserializable() -> Any:
            raise TypeError("not JSON")

        calls = [
            (_output(run_id, FRESH + 11, ""), serialized("a")),
            (_output(run_id, taken, ""), serialized("again")),  # its id is recorded already
            (_output(run_id, FRESH + 12, ""), unserializable),
            (_output(run_id, FRESH + 13, ""), serialized("b")),
        ]
        outcomes: list[BaseException | None] = [None] * len(calls)

        async def record(i: int) -> None:
            try:
                await group.record_async(*calls[i])
            except BaseException as exc:
                outcomes[i] = exc

        async with anyio.create_task_group() as tg:
            group.writer.acquire()  # another commit in progress: the four queue together
            try:
                for i in range(len(calls)):
                    tg.start_soon(record, i)
                await anyio.wait_all_tasks_blocked()  # each step enqueued its output and waits for it
                assert len(group.queue) == len(calls)
            finally:
                group.writer.release()
        assert outcomes[0] is None and outcomes[3] is None
        assert type(outcomes[1]).__name__ == "DBOSStepNondeterminismError"
        assert isinstance(outcomes[2], TypeError)
        recorded = await anyio.to_thread.run_sync(steps.recorded_step_ids, run_id)
        assert {FRESH + 11, FRESH + 13} <= recorded and FRESH + 12 not in recorded
        step = steps._sys_db().check_operation_execution(run_id, FRESH + 13, f"test:{FRESH + 13}")
        assert step is not None and JSONSerializer().deserialize(step["output"]) == "b"
