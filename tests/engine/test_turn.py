"""Classifying one supervisor turn (`handoffs.turn.classify`), a pure function: no model, no run."""

from __future__ import annotations

import pytest

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.budget import Breakers, Budget, FinalCall
from mcp_team.handoffs.schema import Budgets
from mcp_team.handoffs.turn import Rejected, classify
from mcp_team.llm import ToolUseBlock, Usage
from mcp_team.llm.call import CallNeed

TEAM = ("researcher", "writer")


def use(id: str, name: str, **args: object) -> ToolUseBlock:
    return ToolUseBlock(id=id, name=name, input=args)


def test_handoffs_are_numbered_in_call_order_from_the_first_free_number() -> None:
    plan = classify(
        [use("a", "handoff_to_writer", task="draft"), use("b", "handoff_to_researcher", task="find")], TEAM, "run1", 5
    )
    assert [(h.id, h.seq, h.target, h.call_id, h.task, h.run_id) for h in plan.handoffs] == [
        ("h5", 5, "writer", "a", "draft", "run1"),
        ("h6", 6, "researcher", "b", "find", "run1"),
    ]
    assert plan.call_ids == ("a", "b") and plan.rejected == () and plan.answer is None


def test_rejected_calls_keep_their_place_and_take_no_number() -> None:
    plan = classify(
        [
            use("a", "handoff_to_ghost", task="haunt"),
            use("b", "handoff_to_writer", task=["not", "text"]),
            use("c", "handoff_to_researcher", task="find"),
            use("d", "finalize", answer="too early"),
        ],
        TEAM,
        "run1",
        1,
    )
    assert [(h.id, h.call_id) for h in plan.handoffs] == [("h1", "c")]
    ghost, malformed, finalize = plan.rejected
    assert ghost == Rejected(
        "a",
        "unknown_specialist",
        "ghost",
        "there is no specialist 'ghost' (tool handoff_to_ghost). Available: researcher, writer.",
        "haunt",
    )
    assert (malformed.kind, malformed.specialist) == ("malformed_handoff", "writer")
    assert "task: Input should be a valid string" in malformed.reason
    assert (finalize.kind, finalize.call_id) == ("finalize", "d")
    assert finalize.reason.startswith("not finalized: handoffs in the same turn are still running")
    assert plan.call_ids == ("a", "b", "c", "d") and plan.answer is None


def test_a_tool_that_is_not_a_handoff_is_an_unknown_specialist() -> None:
    (rejected,) = classify([use("a", "calculate", expression="1+1")], TEAM, "run1", 1).rejected
    assert (rejected.kind, rejected.specialist) == ("unknown_specialist", "calculate")


def test_finalize_alone_is_the_answer() -> None:
    plan = classify([use("a", "finalize", answer="Paris.")], TEAM, "run1", 1)
    assert (plan.answer, plan.handoffs, plan.rejected) == ("Paris.", (), ())


def test_finalize_without_an_answer_is_rejected() -> None:
    plan = classify([use("a", "finalize", answer="  ")], TEAM, "run1", 1)
    (rejected,) = plan.rejected
    assert plan.answer is None and rejected.reason == "finalize needs a non-empty 'answer' string"


def test_breakers_settle_to_handoff_order_whatever_the_finishing_order() -> None:
    # Two researcher handoffs ran at once: h1 failed, h2 completed. Whichever finished last, the
    # streak afterwards is the one of handoff order: h2's success ends it.
    for finishing in ([("researcher", False), ("researcher", True)], [("researcher", True), ("researcher", False)]):
        breakers = Breakers(threshold=2)
        before = breakers.snapshot()
        for specialist, ok in finishing:
            breakers.record(specialist, ok)
        breakers.settle(before, [("researcher", False), ("researcher", True)])
        assert breakers.snapshot() == {"researcher": 0}


@pytest.mark.anyio
async def test_a_budget_that_runs_out_raises_budget_exhausted() -> None:
    budget = Budget(Budgets(max_model_calls=2, max_tokens=100))
    need = CallNeed(prompt_tokens=10, max_tokens=20)
    (await budget.before_call(need)).release()
    with pytest.raises(BudgetExhausted) as caught:
        await budget.before_call(need)  # one call is kept in reserve for the closing synthesis
    assert caught.value.budget == "the model-call budget (2) was used up" == budget.exhausted
    await FinalCall(budget).before_call(need)  # the reserved call
    budget.after_call(Usage(input_tokens=100))
    assert budget.exhausted == "the model-call budget (2) was used up"  # the first budget to run out is kept
