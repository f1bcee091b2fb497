"""The engine through its public API (`Team.run`): every failure path, its result and its span tree."""

from __future__ import annotations

import anyio
import pytest

from mcp_team.handoffs import Budgets, RunEvent, RunResult, RunSettings, Team
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet, ToolResultBlock
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
from mcp_team.telemetry import attributes as A

pytestmark = pytest.mark.anyio

FULL_REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."


def offline_team(faults: str = "", latency: float = 0.0, **settings: object) -> Team:
    model = FaultyModel(OfflineModel(latency=latency), parse_faults(faults))
    return Team(ModelSet.single(model), settings=RunSettings(**settings))  # type: ignore[arg-type]


def statuses(result: RunResult) -> list[tuple[str, str]]:
    return [(h.target, h.status) for h in result.handoffs]


async def test_adaptive_run_delegates_in_parallel_and_traces_every_step(spans) -> None:
    result = await offline_team().run(FULL_REQUEST)

    assert result.status == "complete", result.answer
    assert statuses(result) == [
        ("researcher", "completed"),
        ("analyst", "completed"),
        ("writer", "completed"),
        ("reviewer", "completed"),
    ]
    assert "12*(3+4)/2 = 42" in result.answer  # the analyst used its calculator; the writer used the result
    assert result.failures == []
    assert result.trace_id and len(result.trace_id) == 32
    assert result.usage.total.total_tokens == sum(u.total_tokens for u in result.usage.by_specialist.values())
    assert set(result.usage.by_specialist) == {"supervisor", "researcher", "analyst", "writer", "reviewer"}
    assert result.handoffs[3].verdict is not None and result.handoffs[3].verdict.verdict == "PASS"

    root = spans.one("invoke_agent supervisor")
    assert spans.parent(root) is None
    assert spans.attr(root, A.CONVERSATION_ID) == result.run_id
    assert format(root.context.trace_id, "032x") == result.trace_id
    transfers = [s for s in spans.children(root) if s.name.startswith("execute_tool transfer_to_")]
    assert [s.name for s in transfers] == [
        f"execute_tool transfer_to_{n}" for n in ("researcher", "analyst", "writer", "reviewer")
    ]
    analyst_transfer = transfers[1]
    assert spans.attr(analyst_transfer, A.TRANSFER_TARGET_NAME) == "analyst"
    assert spans.attr(analyst_transfer, A.AGENT_NAME) == "supervisor"
    (analyst,) = spans.children(analyst_transfer)
    assert analyst.name == "invoke_agent analyst"
    assert [s.name for s in spans.children(analyst)] == ["chat offline", "execute_tool calculate", "chat offline"]
    assert spans.attr(analyst, A.USAGE_INPUT_TOKENS) == result.handoffs[1].usage.input_tokens
    phases = [spans.attr(s, A.PHASE) for s in spans.children(root) if s.name.startswith("chat")]
    assert phases == ["act", "act", "act", "act"]
    assert all(spans.attr(s, A.CONVERSATION_ID) == result.run_id for s in spans.all)
    assert all(s.status.status_code.name != "ERROR" for s in spans.all)


async def test_parallel_handoffs_overlap_in_time() -> None:
    result = await offline_team(latency=0.1).run("Research bees and calculate 2+2")
    research, analysis = result.handoffs[:2]
    assert research.started_at and analysis.started_at and research.ended_at and analysis.ended_at
    assert research.started_at < analysis.ended_at and analysis.started_at < research.ended_at


async def test_failed_specialist_is_retried_with_a_refined_task(spans) -> None:
    result = await offline_team("rate_limit:researcher:1").run("Research bees")

    assert result.status == "complete"
    first, retry = result.handoffs
    assert (first.status, first.error_type, first.attempt) == ("failed", "rate_limited", 1)
    assert (retry.status, retry.attempt, retry.retry_of) == ("completed", 2, first.id)
    assert retry.task != first.task and "short and focused" in retry.task  # rewritten by the supervisor
    assert [(f.kind, f.recovered) for f in result.failures] == [("rate_limited", True)]

    root = spans.one("invoke_agent supervisor")
    refine = [s for s in spans.children(root) if spans.attr(s, A.PHASE) == "refine"]
    assert len(refine) == 1
    failed_transfer, ok_transfer = spans.named("execute_tool transfer_to_researcher")
    assert spans.attr(failed_transfer, A.ERROR_TYPE) == "rate_limited"
    assert failed_transfer.status.status_code.name == "ERROR"
    assert spans.attr(ok_transfer, A.HANDOFF_ATTEMPT) == 2 and spans.attr(ok_transfer, A.ERROR_TYPE) is None


async def test_retries_stop_at_the_cap_and_the_answer_says_what_is_missing(spans) -> None:
    result = await offline_team("server_error:researcher", max_retries=1).run("Research bees and calculate 2+2")

    assert result.status == "partial"
    assert [h.status for h in result.handoffs if h.target == "researcher"] == ["failed", "failed"]
    assert [h.status for h in result.handoffs if h.target == "analyst"] == ["completed"]
    assert [f.kind for f in result.failures if not f.recovered] == ["server_error", "server_error"]
    assert "Incomplete. This answer is missing:" in result.answer
    assert "- researcher on" in result.answer and "server_error" in result.answer
    assert spans.one("invoke_agent supervisor").status.status_code.name == "ERROR"


def _supervisor_script(*turns: list[tuple[str, dict[str, object]]], answer: str = "done") -> list[ModelResponse]:
    return [
        *(tool_calls(*turn, prefix=f"t{i}") for i, turn in enumerate(turns)),
        tool_calls(("finalize", {"answer": answer}), prefix="fin"),
    ]


async def test_circuit_breaker_opens_after_repeated_failures(spans) -> None:
    supervisor = ScriptedModel(
        _supervisor_script(
            [("handoff_to_researcher", {"task": "find A"})],
            [("handoff_to_researcher", {"task": "find B"})],
            [("handoff_to_researcher", {"task": "find C"})],
        )
    )
    specialist = FaultyModel(OfflineModel(), parse_faults("server_error:researcher"))
    team = Team(
        ModelSet({SUPERVISOR: supervisor, SPECIALIST: specialist}),
        settings=RunSettings(max_retries=0, breaker_threshold=2),
    )

    result = await team.run("Research A, B and C")

    assert statuses(result) == [("researcher", "failed"), ("researcher", "failed"), ("researcher", "refused")]
    assert result.handoffs[2].error_type == "circuit_open"
    assert len(spans.named("chat offline")) == 2  # the third handoff never reached the model
    assert [f.kind for f in result.failures] == ["server_error", "server_error", "circuit_open"]
    assert result.status == "failed"
    third_turn_results = supervisor.requests[3].messages[-1].blocks
    assert isinstance(third_turn_results[0], ToolResultBlock) and third_turn_results[0].is_error
    assert "circuit is open" in third_turn_results[0].content
    assert len(spans.named("execute_tool transfer_to_researcher")) == 2


async def test_unknown_specialist_goes_back_to_the_supervisor_as_an_error(spans) -> None:
    supervisor = ScriptedModel(
        _supervisor_script([("handoff_to_ghost", {"task": "haunt"}), ("handoff_to_researcher", {"task": "find bees"})])
    )
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))

    result = await team.run("Research bees")

    assert result.status == "complete"
    assert statuses(result) == [("researcher", "completed")]
    assert [(f.kind, f.specialist) for f in result.failures] == [("unknown_specialist", "ghost")]
    ghost, researcher = supervisor.requests[1].messages[-1].blocks
    assert isinstance(ghost, ToolResultBlock) and ghost.is_error
    assert "no specialist 'ghost'" in ghost.content and "researcher" in ghost.content
    assert isinstance(researcher, ToolResultBlock) and not researcher.is_error
    assert spans.named("execute_tool transfer_to_ghost") == []


async def test_unknown_specialist_fault_from_the_offline_supervisor() -> None:
    result = await offline_team("unknown_specialist:supervisor:1").run("Research bees")
    assert result.status == "complete"
    assert [f.kind for f in result.failures] == ["unknown_specialist"]


async def test_malformed_handoff_is_answered_with_the_validation_error(spans) -> None:
    result = await offline_team("malformed_tool_call:supervisor:1").run("Research bees")

    assert result.status == "complete"  # the supervisor recovered on its next turn
    (failure,) = result.failures
    assert failure.kind == "malformed_handoff"
    assert "task" in failure.reason and "expected" in failure.reason.lower()
    assert statuses(result) == [("researcher", "completed")]
    assert len(spans.named("execute_tool transfer_to_researcher")) == 1  # the malformed call never ran


async def test_identical_repeated_handoffs_are_detected_and_stopped(spans) -> None:
    result = await offline_team("repeat_handoff:supervisor", max_repeats=2).run("Research bees")

    assert result.status == "partial"
    assert result.stopped_by and "loop detected" in result.stopped_by
    assert statuses(result) == [("researcher", "completed"), ("researcher", "refused"), ("researcher", "refused")]
    assert len(spans.named("invoke_agent researcher")) == 1  # duplicates never ran
    assert "[offline researcher]" in result.answer  # the partial answer keeps the work that was done
    assert "loop detected" in result.answer


async def test_dependency_failure_skips_the_dependent_task_in_planned_mode(spans) -> None:
    team = offline_team("server_error:researcher", max_retries=0)
    result = await team.run("Research bees, calculate 2+2 and write a report", mode="planned")

    assert result.plan is not None
    writer = next(t for t in result.plan.tasks if t.specialist == "writer")
    assert set(writer.depends_on) == {"t1", "t2"}
    assert statuses(result) == [("researcher", "failed"), ("analyst", "completed"), ("writer", "skipped")]
    skipped = result.handoffs[2]
    assert skipped.error_type == "dependency_failed" and "t1 (researcher: failed)" in (skipped.error or "")
    assert {f.kind for f in result.failures} == {"server_error", "dependency_failed"}
    assert result.status == "partial"
    assert spans.one("plan supervisor").parent.span_id == spans.one("invoke_agent supervisor").context.span_id
    synth = [s for s in spans.all if spans.attr(s, A.PHASE) == "synthesize"]
    assert len(synth) == 1


async def test_planned_mode_runs_the_dag_and_passes_dependency_results() -> None:
    result = await offline_team().run(FULL_REQUEST, mode="planned")
    assert result.status == "complete"
    assert [t.specialist for t in result.plan.tasks] == ["researcher", "analyst", "writer", "reviewer"]
    writer = result.handoffs[2]
    assert writer.target == "writer"
    assert "Result of t2 (analyst)" in writer.context and "= 42" in writer.context


async def test_invalid_plan_gets_one_repair_round() -> None:
    bad = tool_calls(("submit_plan", {"tasks": [{"id": "t1", "specialist": "wizard", "description": "x"}]}))
    good = tool_calls(
        ("submit_plan", {"tasks": [{"id": "t1", "specialist": "researcher", "description": "x"}], "combine": "as is"})
    )
    supervisor = ScriptedModel([bad, good, tool_calls(("finalize", {"answer": "final"}))])
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))

    result = await team.run("Research x", mode="planned")

    assert result.status == "complete" and result.answer == "final"
    feedback = supervisor.requests[1].messages[-1].blocks[0]
    assert isinstance(feedback, ToolResultBlock) and "unknown specialist 'wizard'" in feedback.content


async def test_a_plan_that_stays_invalid_fails_the_run_clearly() -> None:
    cyclic = {
        "tasks": [
            {"id": "a", "specialist": "researcher", "description": "x", "depends_on": ["b"]},
            {"id": "b", "specialist": "writer", "description": "y", "depends_on": ["a"]},
        ]
    }
    supervisor = ScriptedModel([tool_calls(("submit_plan", cyclic)), tool_calls(("submit_plan", cyclic))])
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))

    result = await team.run("x", mode="planned")

    assert result.status == "failed"
    assert result.handoffs == []
    assert "cycle" in result.answer and "a -> b -> a" in result.answer
    assert [f.kind for f in result.failures] == ["invalid_plan"]


async def test_reviewer_loop_is_capped() -> None:
    # One revision is honoured: the draft is reviewed, revised, reviewed again; a third review is refused.
    result = await offline_team("revise:reviewer", max_revisions=1).run("Write a short report on bees and review it")

    reviews = [h for h in result.handoffs if h.target == "reviewer"]
    assert [(h.status, h.verdict.verdict if h.verdict else None) for h in reviews] == [
        ("completed", "REVISE"),
        ("completed", "REVISE"),
        ("refused", None),
    ]
    assert reviews[-1].error_type == "revision_cap"
    assert "the revision cap is reached after 1 revision (max_revisions = 1)" in (reviews[-1].error or "")
    assert len([h for h in result.handoffs if h.target == "writer"]) == 3
    assert result.status == "partial"  # the last verdict is still REVISE: the review did not pass
    assert [f.kind for f in result.failures if not f.recovered] == ["review_not_passed"]


async def test_specialist_that_never_stops_calling_tools_hits_max_turns(spans) -> None:
    result = await offline_team("endless_tools:analyst", max_retries=0).run("Calculate 2+2")

    (handoff,) = result.handoffs
    assert (handoff.status, handoff.error_type, handoff.turns) == ("failed", "max_turns", 6)
    assert "calculate" in (handoff.error or "")
    assert result.status == "failed"
    assert len(spans.named("execute_tool calculate")) == 5
    assert spans.attr(spans.one("invoke_agent analyst"), A.ERROR_TYPE) == "max_turns"


async def test_model_call_timeout_is_a_retryable_failure(spans) -> None:
    result = await offline_team("timeout:researcher:1", call_timeout=0.2).run("Research bees")
    first, retry = result.handoffs
    assert (first.error_type, retry.status) == ("timeout", "completed")
    assert result.status == "complete"
    assert [(f.kind, f.recovered) for f in result.failures] == [("timeout", True)]
    timed_out, _ok = spans.named("chat offline")[1:3]  # after the supervisor's first turn
    assert spans.attr(timed_out, A.ERROR_TYPE) == "timeout"


async def test_handoff_budget_winds_down_with_a_partial_answer(spans) -> None:
    result = await offline_team(budgets=Budgets(max_handoffs=2)).run(FULL_REQUEST)
    assert len([s for s in spans.all if s.name.startswith("execute_tool transfer_to_")]) == 2
    assert [spans.attr(s, A.PHASE) for s in spans.named("chat offline")][-1] == "synthesize"  # the wind-down

    assert result.status == "partial"
    assert result.stopped_by and "handoff budget (2)" in result.stopped_by
    completed = [h for h in result.handoffs if h.status == "completed"]
    assert len(completed) == 2
    assert "[offline researcher]" in result.answer or "[offline analyst]" in result.answer
    assert "The run stopped early" in result.answer


async def test_model_call_budget_is_shared_by_parallel_branches() -> None:
    result = await offline_team(budgets=Budgets(max_model_calls=4)).run(FULL_REQUEST)
    assert result.usage.model_calls <= 4
    assert result.status == "partial"
    assert result.stopped_by and "model-call budget (4)" in result.stopped_by


async def test_token_budget_stops_the_run() -> None:
    result = await offline_team(budgets=Budgets(max_tokens=600)).run(FULL_REQUEST)
    assert result.status in ("partial", "failed")
    assert result.stopped_by and "token budget (600)" in result.stopped_by
    assert not any(h.target == "reviewer" and h.status == "completed" for h in result.handoffs)


async def test_deadline_cancels_running_work_and_returns_promptly(spans) -> None:
    # The writer's model never answers: only the deadline can end this run (the call timeout is 180 s).
    team = offline_team("timeout:writer", budgets=Budgets(deadline_seconds=0.5))
    result = await team.run("Research bees and write a report")

    assert result.status == "partial"
    assert result.stopped_by and "deadline (0.5 s)" in result.stopped_by
    assert ("writer", "cancelled") in statuses(result)
    assert ("researcher", "completed") in statuses(result)
    writer_span = spans.one("invoke_agent writer")
    assert spans.attr(writer_span, A.ERROR_TYPE) == "cancelled"


async def test_cancellation_stops_every_branch_and_records_the_run(spans) -> None:
    finished: list[RunResult] = []
    team = offline_team(latency=0.3)
    both_started = anyio.Event()

    async def on_event(event: RunEvent) -> None:
        if event.kind == "handoff_started" and event.started == 2:
            both_started.set()  # both specialists are now inside their 300 ms model calls

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: team.run("Research bees and calculate 2+2", on_event=on_event, on_finish=finished.append))
        await both_started.wait()
        tg.cancel_scope.cancel()

    (record,) = finished
    assert record.status == "cancelled"
    assert statuses(record) == [("researcher", "cancelled"), ("analyst", "cancelled")]
    await anyio.sleep(0.4)  # nothing may still be running: no span may finish after the cancel
    names = {s.name for s in spans.all}
    assert "invoke_agent researcher" in names
    assert spans.attr(spans.one("invoke_agent supervisor"), A.ERROR_TYPE) == "cancelled"
    assert all(
        spans.attr(s, A.ERROR_TYPE) == "cancelled"
        for s in spans.named("chat offline")
        if spans.parent(s) and spans.parent(s).name == "invoke_agent researcher"
    )


class _CountingModel:
    """Measures how many calls are in flight at once."""

    name = provider = "counting"

    def __init__(self) -> None:
        self.inner = OfflineModel(latency=0.05)
        self.in_flight = self.peak = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await self.inner.complete(request)
        finally:
            self.in_flight -= 1


async def test_concurrency_limit_bounds_parallel_model_calls() -> None:
    from mcp_team.specialists import Specialist

    model = _CountingModel()
    crew = [Specialist(name=f"w{i}", description="works", system_prompt="work") for i in range(6)]
    team = Team(ModelSet.single(model, max_concurrency=2), specialists=crew)

    result = await team.run("Do the work")

    assert result.status == "complete" and len(result.handoffs) == 6
    assert model.peak == 2


async def test_supervisor_model_failure_fails_the_run_with_the_reason() -> None:
    from mcp_team.llm import ModelError

    supervisor = ScriptedModel([ModelError("auth", "invalid x-api-key: check ANTHROPIC_API_KEY", status=401)])
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))
    result = await team.run("Research bees")
    assert result.status == "failed"
    assert result.failures[0].kind == "auth" and "ANTHROPIC_API_KEY" in result.answer


async def test_supervisor_answering_in_plain_text_is_accepted() -> None:
    team = Team(ModelSet({SUPERVISOR: ScriptedModel([text("Paris.")]), SPECIALIST: OfflineModel()}))
    result = await team.run("Capital of France?")
    assert (result.status, result.answer, result.handoffs) == ("complete", "Paris.", [])


async def test_a_failing_progress_sink_never_stops_the_run() -> None:
    async def broken_sink(event: RunEvent) -> None:
        raise ConnectionResetError("the client went away")

    result = await offline_team().run("Research bees and calculate 2+2", on_event=broken_sink)
    assert result.status == "complete" and len(result.handoffs) == 2


async def test_a_supervisor_that_says_nothing_is_asked_once_more_then_the_run_says_why_it_failed() -> None:
    supervisor = ScriptedModel([text(""), text("")])
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))
    result = await team.run("Research bees")
    assert result.status == "failed"
    assert [(f.kind, f.recovered) for f in result.failures] == [("empty_answer", False), ("empty_answer", False)]
    told = supervisor.requests[1].messages[-1].content
    assert isinstance(told, str) and "not an answer" in told and "empty" in told
    assert "gave no answer" in (result.stopped_by or "") and any("no answer" in n for n in result.notes)
    assert "no answer" in result.answer.lower()


async def test_a_supervisor_that_says_nothing_once_and_then_answers_recovers() -> None:
    team = Team(ModelSet({SUPERVISOR: ScriptedModel([text(""), text("Bees pollinate.")]), SPECIALIST: OfflineModel()}))
    result = await team.run("Research bees")
    assert (result.status, result.answer) == ("complete", "Bees pollinate.")
    assert [(f.kind, f.recovered) for f in result.failures] == [("empty_answer", True)]


async def test_truncated_specialist_answer_is_a_failure_that_is_retried() -> None:
    from mcp_team.llm import ModelResponse, TextBlock, Usage

    cut = ModelResponse(
        content=[TextBlock(text="The history of the transis")],
        stop_reason="max_tokens",
        model="scripted",
        usage=Usage(input_tokens=5, output_tokens=4096),
    )
    specialist = ScriptedModel([cut, text("A short history of the transistor.")])
    supervisor = ScriptedModel(
        [
            tool_calls(("handoff_to_researcher", {"task": "history of the transistor"})),
            lambda request: (
                text("ok") if request.phase != "refine" else tool_calls(("refine_task", {"task": "shorter"}))
            ),
            tool_calls(("finalize", {"answer": "done"})),
        ]
    )
    result = await Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: specialist})).run("History of the transistor")

    first, retry = result.handoffs
    assert (first.status, first.error_type) == ("failed", "truncated")
    assert first.usage.output_tokens == 4096  # what it spent is kept
    assert (retry.status, retry.task) == ("completed", "shorter")
    assert result.status == "complete"


async def test_every_failed_task_is_listed_as_missing() -> None:
    supervisor = ScriptedModel(
        _supervisor_script(
            [("handoff_to_researcher", {"task": "find A"}), ("handoff_to_researcher", {"task": "find B"})]
        )
    )
    team = Team(
        ModelSet({SUPERVISOR: supervisor, SPECIALIST: FaultyModel(OfflineModel(), parse_faults("server_error"))}),
        settings=RunSettings(max_retries=0),
    )
    result = await team.run("Find A and B")
    assert result.status == "failed"
    assert 'researcher on "find A"' in result.answer and 'researcher on "find B"' in result.answer


async def test_synthesis_reads_only_the_last_attempt_of_each_task() -> None:
    result = await offline_team("server_error:researcher:2").run("Research bees", mode="planned")

    assert [h.status for h in result.handoffs] == ["failed", "failed", "completed"]  # two retries, the last one works
    assert result.status == "complete"
    # The offline synthesizer echoes what it was given: one researcher result, no failed attempt.
    assert result.answer.count("### researcher") == 1 and "(failed)" not in result.answer
