"""A handoff shown finished is stored finished: concurrent ends of a fan-out never let one end's write carry a
record without another's end that is already shown (or about to be), so a kill at any moment after a client saw a
handoff `completed` finds it so in the store, and a restart keeps it as it was (issue 32)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from mcp_team.runs.service import Runs
from mcp_team.runs.store import MemoryRunStore
from mcp_team.runs.team_engine import TeamEngine
from mcp_team.runs.types import RunRecord, RunRequest
from support import team_worker

pytestmark = pytest.mark.anyio


class SlowStore(MemoryRunStore):
    """A store whose writes take a while, as a database's do under load: the window where ends overlap."""

    async def _commit(self, records: Sequence[RunRecord]) -> frozenset[str]:
        await anyio.sleep(0.02)
        return self._write_batch(records)


def _completed(record: RunRecord | None) -> set[str]:
    return {h.id for h in (record.result.handoffs if record and record.result else []) if h.status == "completed"}


async def test_every_handoff_shown_completed_is_stored_completed(tmp_path: Path) -> None:
    # eight workers on the offline model: four answer at once and end within a few ms of each other, four call their
    # calculator first and end together a call later
    engine = TeamEngine(team_worker.team(8, 0.05, str(tmp_path / "calls.log")))
    store = SlowStore()
    runs = Runs(store, engine, executor_id="test")
    ahead: list[str] = []
    seen = 0  # handoffs seen completed while their run ran
    async with anyio.create_task_group() as tg:
        runs.serve(tg)
        for _ in range(5):
            run_id = (await runs.start(RunRequest(request="Each of you: compute 6*7 and report."))).run_id
            while (shown := await runs.get(run_id)) is not None and not shown.finished:
                seen += len(_completed(shown))
                if missing := _completed(shown) - _completed(store.stored(run_id)):
                    ahead.append(f"run {run_id}: {sorted(missing)} shown completed, stored otherwise")
                await anyio.lowlevel.checkpoint()  # a look at every turn of the loop
        await runs.close()
        tg.cancel_scope.cancel()
    assert not ahead, ahead
    assert seen >= 8, "no handoff was seen completed while the runs ran: nothing was tested"
