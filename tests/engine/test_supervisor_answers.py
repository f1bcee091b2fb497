"""What the adaptive supervisor's turns come to when its model misbehaves, through `Team.run` on scripted
models: an answer cut off at the output limit or refused is never a complete one, and a model that keeps
making the same tool-call mistake is stopped, with the mistake named."""

from __future__ import annotations

import pytest

from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.llm import ModelResponse, ModelSet, TextBlock, ToolUseBlock, Usage
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.scripted import ScriptedModel, Step, text, tool_calls

pytestmark = pytest.mark.anyio

HANDOFF = ("handoff_to_researcher", {"task": "Research bees"})


def cut_off(answer: str) -> ModelResponse:
    """A text answer that hit the output token limit."""
    return ModelResponse(
        content=[TextBlock(text=answer)], stop_reason="max_tokens", model="scripted", usage=Usage(output_tokens=4096)
    )


async def run(steps: list[Step], **settings: object) -> tuple[RunResult, ScriptedModel]:
    supervisor = ScriptedModel(steps)
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}), settings=RunSettings(**settings))  # type: ignore[arg-type]
    return await team.run("Research bees"), supervisor


# -- answers that are not complete -----------------------------------------------------------------


async def test_an_answer_cut_off_after_finished_work_is_partial_and_says_how_to_raise_the_limit() -> None:
    result, _ = await run([tool_calls(HANDOFF), cut_off("Bees are insects that pollin")])
    assert result.status == "partial"
    assert result.answer.startswith("Bees are insects that pollin\n\n---\nIncomplete.")  # what it wrote is kept
    (failure,) = result.failures
    assert (failure.kind, failure.specialist, failure.recovered) == ("truncated", "supervisor", False)
    assert "cut off at its output token limit" in failure.reason
    assert "MCP_TEAM_SUPERVISOR_SAMPLING" in failure.reason and "supervisor_sampling" in failure.reason
    assert failure.reason in result.answer


async def test_an_answer_cut_off_with_no_finished_work_is_not_complete() -> None:
    result, _ = await run([cut_off("The answer is trunc")])
    # Not complete, and not failed either: the answer is there, cut short (`mcp-team run` exits 3, as README says)
    assert result.status == "partial"
    assert [f.kind for f in result.failures] == ["truncated"]
    assert result.answer.startswith("The answer is trunc") and "cut off" in result.answer


async def test_a_finalize_answer_cut_off_is_not_complete_either() -> None:
    finalize = ToolUseBlock(id="f", name="finalize", input={"answer": "Bees are"})
    cut = ModelResponse(content=[finalize], stop_reason="max_tokens", model="scripted")
    result, _ = await run([tool_calls(HANDOFF), cut])
    assert result.status == "partial" and [f.kind for f in result.failures] == ["truncated"]


async def test_a_closing_synthesis_cut_off_is_not_complete_either() -> None:
    # one supervisor turn: it hands off, then the run closes with the synthesis, which hits the limit
    result, supervisor = await run([tool_calls(HANDOFF), cut_off("Bees are")], max_supervisor_turns=1)
    assert [r.phase for r in supervisor.requests][-1] == "synthesize", "the synthesis was not the cut-off call"
    assert result.status == "partial" and result.answer.startswith("Bees are")
    assert any(f.kind == "truncated" and f.reason.startswith("the closing synthesis: ") for f in result.failures)


async def test_a_refusal_is_no_answer() -> None:
    refusal = ModelResponse(content=[TextBlock(text="I can't help with that.")], stop_reason="refusal", model="m")
    result, _ = await run([refusal])
    assert result.status == "failed"
    (failure,) = result.failures
    assert failure.kind == "model_refused" and "declined the request: I can't help with that." in failure.reason
    assert not result.answer.startswith("I can't help")


async def test_a_refusal_after_finished_work_still_gets_a_synthesis() -> None:
    refusal = ModelResponse(content=[], stop_reason="refusal", model="m")
    result, supervisor = await run([tool_calls(HANDOFF), refusal, text("Bees pollinate.")])
    assert result.status == "partial" and result.answer.startswith("Bees pollinate.")
    assert [f.kind for f in result.failures] == ["model_refused"]
    assert supervisor.requests[-1].phase == "synthesize"


# -- the same mistake, again and again -------------------------------------------------------------


def wizard(turn: int) -> ModelResponse:
    return tool_calls(("handoff_to_wizard", {"task": "x"}), prefix=f"w{turn}")


async def test_the_same_unknown_tool_three_times_in_a_row_stops_the_run_naming_it() -> None:
    result, supervisor = await run([wizard(i) for i in range(3)])  # max_repeats 2: made once, repeated twice
    assert len(supervisor.requests) == 3
    assert result.status == "failed"
    assert result.stopped_by is not None
    assert result.stopped_by.startswith("the supervisor called unknown tool handoff_to_wizard 3 times in a row")
    assert "use a supervisor model" in result.stopped_by
    assert result.stopped_by.endswith(
        "The last error: there is no specialist 'wizard' (tool handoff_to_wizard). "
        "Available: researcher, analyst, writer, coder, reviewer"
    )
    assert result.stopped_by in result.answer
    assert [f.kind for f in result.failures] == ["unknown_specialist"] * 3


async def test_the_limit_is_max_repeats() -> None:
    result, supervisor = await run([wizard(i) for i in range(5)], max_repeats=4)
    assert len(supervisor.requests) == 5
    assert result.stopped_by is not None and "handoff_to_wizard 5 times in a row" in result.stopped_by


async def test_a_turn_that_hands_work_off_starts_the_count_again() -> None:
    steps: list[Step] = [wizard(0), wizard(1), tool_calls(HANDOFF), wizard(2), wizard(3)]
    result, supervisor = await run([*steps, tool_calls(("finalize", {"answer": "Bees."}))])
    assert len(supervisor.requests) == 6  # never three in a row
    assert (result.status, result.answer, result.stopped_by) == ("complete", "Bees.", None)


async def test_different_mistakes_are_not_one_repeated() -> None:
    malformed = tool_calls(("handoff_to_researcher", {"tusk": "typo"}), prefix="m")
    result, supervisor = await run([wizard(0), wizard(1), malformed, wizard(2), text("Bees.")])
    assert len(supervisor.requests) == 5
    assert result.status == "complete"


async def test_a_call_written_as_text_again_and_again_stops_the_run() -> None:
    written = text('{"name": "handoff_to_researcher", "arguments": {"task": "Research bees"}}')
    result, supervisor = await run([written, written, written])
    assert len(supervisor.requests) == 3
    assert result.stopped_by is not None
    assert result.stopped_by == (
        "the supervisor wrote a call of handoff_to_researcher as text instead of calling it 3 times in a row; "
        "use a supervisor model that follows the tool schemas it is given"
    )


async def test_turns_used_up_on_mistakes_say_which() -> None:
    result, _ = await run([wizard(0), wizard(1)], max_supervisor_turns=2, max_repeats=5)
    assert result.stopped_by is not None
    assert result.stopped_by.startswith(
        "the supervisor used all 2 of its turns without finalizing; it called unknown tool handoff_to_wizard "
        "on its last 2 turn(s). The last error: there is no specialist 'wizard'"
    )
