"""Checkpoints from Python (`Team.run(checkpoints=..., approve=...)`): a caller without an approver is told how to
give one, and an approver not written as one (a plain def, a return that is not a Decision) is named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_team import ModelSet, RunSettings, Specialist, Team
from mcp_team.handoffs.checkpoints import Checkpoint, Decision
from mcp_team.llm.offline import OfflineModel

pytestmark = pytest.mark.anyio


def team() -> Team:
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="List facts only.")
    return Team(ModelSet.single(OfflineModel()), [scout], RunSettings(checkpoints=["plan"]))


async def test_a_run_without_an_approver_says_how_to_give_one_in_python() -> None:
    result = await team().run("Find facts about bees")
    assert result.status == "failed"
    assert "pass approve= (an async Checkpoint -> Decision) to Team.run" in result.answer
    assert 'RunSettings(checkpoint_policy="approve")' in result.answer


def answers_true() -> Callable[[Checkpoint], Any]:
    async def approve(checkpoint: Checkpoint) -> Any:
        return True

    return approve


def plain_def() -> Callable[[Checkpoint], Any]:
    def approve(checkpoint: Checkpoint) -> Decision:
        return Decision(action="approve")

    return approve


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (answers_true, r'^approve returned a bool, not a Decision: return e.g. Decision\(action="approve"\)'),
        (plain_def, r"^approve returned a Decision, not an awaitable: write it `async def approve\(checkpoint\)"),
    ],
)
async def test_an_approver_not_written_as_one_is_named(make: Callable[[], Any], message: str) -> None:
    seen: list[str] = []
    with pytest.raises(TypeError, match=message):
        await team().run("Find facts about bees", approve=make(), on_finish=lambda r: seen.append(r.status))
    assert seen == ["failed"]  # the record is kept, marked failed
