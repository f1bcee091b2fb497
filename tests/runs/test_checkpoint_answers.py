"""Checkpoint answers passed between replicas (runs/answers.py), on a real SQLite database: an answer is
taken once, by the round it was meant for, and one nobody takes in time is withdrawn (refused, never left
to land later)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

from mcp_team.handoffs.checkpoints import Checkpoint, Decision
from mcp_team.runs import answers as approvals
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.tables import answers_table

pytestmark = pytest.mark.anyio

PLAN = Checkpoint(name="plan", summary="The plan.")


@pytest.fixture
def db(tmp_path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'runs.db'}")
    RunStore(engine).create()
    return engine


def _rows(db: sa.Engine) -> int:
    with db.connect() as conn:
        return len(conn.execute(sa.select(answers_table.c.id)).all())


async def test_a_posted_answer_is_taken_once_by_its_round(db: sa.Engine) -> None:
    inbox = approvals.inbox_of(db)
    taken: list[Decision] = []

    async def runner() -> None:
        with pytest.raises(TimeoutError), anyio.fail_after(3 * approvals.INBOX_POLL):
            await inbox("r1", PLAN.model_copy(update={"round": 2}))  # another round: never this answer
        taken.append(await inbox("r1", PLAN))

    async with anyio.create_task_group() as tg:
        tg.start_soon(runner)
        assert await approvals.post_answer(db, "r1", PLAN, Decision(action="revise", feedback="shorter"))
    assert taken == [Decision(action="revise", feedback="shorter")]
    assert _rows(db) == 0


async def test_an_answer_nobody_takes_is_withdrawn(db: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approvals, "TAKE_WITHIN", 0.3)
    assert not await approvals.post_answer(db, "r1", PLAN, Decision(action="approve"))
    assert _rows(db) == 0
    with anyio.move_on_after(2 * approvals.INBOX_POLL) as waited:  # a runner coming later finds nothing
        await approvals.inbox_of(db)("r1", PLAN)
    assert waited.cancelled_caught
