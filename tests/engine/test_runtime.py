"""The engine's seam to durable execution (`handoffs.runtime`), driven through `Team.run`.

A recording `Runtime` checks what a durable one relies on: every model and tool call of a handoff
happens inside that handoff's branch (and the supervisor's outside any), decisions that depend on
other branches' timing go through `decide` (off the happy path), a replayed decision is obeyed,
and identities and order do not depend on timing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from datetime import timedelta
from typing import Any, TypeVar

import anyio
import pytest

from mcp_team.handoffs import Budgets, RunEvent, RunSettings, Team
from mcp_team.handoffs.admission import Refusal
from mcp_team.handoffs.context import now
from mcp_team.handoffs.runtime import Branch
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.scripted import ScriptedModel, tool_calls
from mcp_team.specialists import Specialist, gather_concurrently

pytestmark = pytest.mark.anyio

T = TypeVar("T")
BRANCH: ContextVar[int | None] = ContextVar("branch", default=None)
FULL_REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."


class RecordingRuntime:
    """Notes the branch every gather and decision happens in; `replay` answers decisions instead of `value`."""

    def __init__(self, replay: dict[tuple[int | None, str], Any] | None = None) -> None:
        self.replay = replay or {}
        self.entered: list[int] = []
        self.open = 0  # branches entered and not yet left
        self.gathered: list[tuple[int | None, int]] = []
        self.decisions: list[tuple[int | None, str, Any]] = []

    async def branches(self, work: Sequence[Branch]) -> None:
        assert BRANCH.get() is None, "branches never nest (no member here is a team)"

        async def one(branch: Branch) -> None:
            seq = int(branch.key.rsplit("/h", 1)[1])  # the key names the handoff: <run id>/h<seq>
            self.entered.append(seq)
            self.open += 1
            token = BRANCH.set(seq)
            try:
                await branch.body()
            finally:
                BRANCH.reset(token)
                self.open -= 1

        async with anyio.create_task_group() as tg:
            for branch in work:
                tg.start_soon(one, branch)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        self.gathered.append((BRANCH.get(), len(calls)))
        return await gather_concurrently(calls)

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        key = (BRANCH.get(), name)
        decided = self.replay[key] if key in self.replay else value()
        self.decisions.append((*key, decided))
        return decided


class BranchLog:
    """A model wrapper noting, per call, the branch it ran in and who asked why."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.provider = inner.name, inner.provider
        self.calls: list[tuple[int | None, str, str]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls.append((BRANCH.get(), request.member, request.phase))
        response: ModelResponse = await self.inner.complete(request)
        return response


def offline(faults: str = "", **settings: Any) -> tuple[Team, BranchLog]:
    model = BranchLog(FaultyModel(OfflineModel(), parse_faults(faults)))
    return Team(ModelSet.single(model), settings=RunSettings(**settings)), model


async def test_every_call_of_a_handoff_runs_in_its_branch_and_the_supervisor_outside() -> None:
    team, model = offline("rate_limit:researcher:1")
    runtime = RecordingRuntime()
    result = await team.run(FULL_REQUEST, runtime=runtime)

    assert result.status == "complete"
    seq = {h.target: h.seq for h in result.handoffs}
    assert [(h.id, h.seq, h.attempt) for h in result.handoffs] == [
        ("h1", 1, 1),
        ("h1.2", 1, 2),  # the retry keeps its branch; its id comes from the first attempt's
        ("h2", 2, 1),
        ("h3", 3, 1),
        ("h4", 4, 1),
    ]
    assert sorted(runtime.entered) == [1, 2, 3, 4]  # one branch per handoff, retries inside it
    for branch, member, phase in model.calls:
        if phase == "act":
            assert (branch, member) == (None, "supervisor")
        elif phase == "refine":
            assert (branch, member) == (seq["researcher"], "supervisor")  # the refine is part of the handoff
        else:
            assert (branch, phase) == (seq[member], "specialist")
    assert runtime.gathered == [(seq["analyst"], 1)]  # the calculator call went through the runtime
    assert runtime.decisions == [(seq["researcher"], "retry 2", None)]  # only the failure asked for a decision


async def test_the_happy_path_takes_no_decisions() -> None:
    team, _ = offline()
    runtime = RecordingRuntime()
    result = await team.run(FULL_REQUEST, runtime=runtime)
    assert result.status == "complete" and runtime.decisions == []


async def test_a_planned_task_that_waited_for_others_is_admitted_through_the_runtime() -> None:
    team, model = offline()
    runtime = RecordingRuntime()
    result = await team.run(FULL_REQUEST, mode="planned", runtime=runtime)

    assert result.status == "complete"
    # t1, t2 start at once (admitted in plan order); the writer and reviewer waited for other branches.
    assert runtime.decisions == [(3, "start", None), (4, "start", None)]
    assert {(b, m) for b, m, p in model.calls if p in ("plan", "synthesize")} == {
        (None, "planner"),
        (None, "supervisor"),
    }


async def test_a_replayed_decision_is_obeyed_whatever_the_state_says_now() -> None:
    team, model = offline("rate_limit:researcher:1")
    # The recorded run found the researcher's circuit open when it considered the retry.
    runtime = RecordingRuntime(replay={(1, "retry 2"): "circuit_open"})
    result = await team.run("Research bees", runtime=runtime)

    (failed,) = [h for h in result.handoffs if h.target == "researcher"]
    assert (failed.status, failed.error_type) == ("failed", "rate_limited")
    assert not any(p == "refine" for _, _, p in model.calls)
    assert result.usage.model_calls == len(model.calls)


async def test_a_replayed_refusal_refuses_a_planned_task() -> None:
    team, model = offline()
    refusal = Refusal(kind="budget_exhausted", reason="not started: replayed")
    runtime = RecordingRuntime(replay={(3, "start"): refusal})
    result = await team.run(FULL_REQUEST, mode="planned", runtime=runtime)

    writer = next(h for h in result.handoffs if h.target == "writer")
    assert (writer.status, writer.error_type, writer.error) == ("refused", "budget_exhausted", "not started: replayed")
    assert not any(m == "writer" for _, m, _ in model.calls)
    assert result.stopped_by and "handoff budget" in result.stopped_by


async def test_planned_ids_follow_the_plan_not_the_order_tasks_start_in() -> None:
    plan = {
        "tasks": [
            {"id": "t1", "specialist": "writer", "description": "write it up", "depends_on": ["t2"]},
            {"id": "t2", "specialist": "researcher", "description": "find facts"},
        ]
    }
    supervisor = ScriptedModel([tool_calls(("submit_plan", plan)), tool_calls(("finalize", {"answer": "done"}))])
    team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: OfflineModel()}))
    result = await team.run("Write up facts", mode="planned")

    assert [(h.id, h.seq, h.call_id, h.target) for h in result.handoffs] == [
        ("h1", 1, "t1", "writer"),  # started second, numbered first: its place in the plan
        ("h2", 2, "t2", "researcher"),
    ]


async def test_records_and_failures_are_in_handoff_order_whatever_finishes_first() -> None:
    # The researcher fails once and its retry finishes after the analyst: the record still lists
    # the researcher's attempts first, as the supervisor asked for them.
    team, _ = offline("rate_limit:researcher:1")
    result = await team.run("Research bees and calculate 2+2")
    assert [(h.id, h.target, h.status) for h in result.handoffs] == [
        ("h1", "researcher", "failed"),
        ("h1.2", "researcher", "completed"),
        ("h2", "analyst", "completed"),
    ]


async def test_a_resumed_run_keeps_its_original_deadline() -> None:
    team, model = offline()
    started = now() - timedelta(seconds=30)
    result = await team.run("Research bees", budgets=Budgets(deadline_seconds=10), started_at=started)

    assert result.started_at == started
    assert result.stopped_by == "the deadline (10 s) passed"
    assert model.calls == [] and result.status == "failed"


async def test_a_fan_out_wider_than_the_budget_and_the_concurrency_limit_says_so() -> None:
    crew = [Specialist(name=f"w{i}", description="works", system_prompt="work") for i in range(32)]
    team = Team(ModelSet.single(OfflineModel(), max_concurrency=8), crew)  # the default budget: 24 handoffs

    result = await team.run("Do the work")

    assert result.status == "partial"
    assert len([h for h in result.handoffs if h.status == "completed"]) == 24
    budget, waves = result.notes
    assert budget.startswith("8 of the 32 handoffs asked for in one turn were not started") and "max_handoffs" in budget
    assert waves.startswith("24 handoffs asked for in one turn were ready to run at once, but at most 8")
    assert "max_concurrency" in waves and "MCP_TEAM_MAX_CONCURRENCY" in waves


async def test_a_plan_wider_than_the_concurrency_limit_says_so() -> None:
    team = Team(ModelSet.single(OfflineModel(), max_concurrency=2))
    result = await team.run("Research bees, calculate 2+2 and write code for it", mode="planned")
    assert result.status == "complete"
    assert result.notes == [
        "3 tasks of the plan were ready to run at once, but at most 2 model calls run at a time, so they ran in "
        "waves. Raise max_concurrency to run them together (ModelSet(max_concurrency=...) in Python, "
        "MCP_TEAM_MAX_CONCURRENCY, or the team file's [supervisor] max_concurrency)."
    ]


async def test_a_run_within_its_limits_has_no_notes() -> None:
    team, _ = offline()
    assert (await team.run(FULL_REQUEST)).notes == []


async def test_a_cancelled_run_leaves_its_branches() -> None:
    team = Team(ModelSet.single(OfflineModel(latency=0.05)))
    runtime = RecordingRuntime()
    both_started = anyio.Event()

    async def on_event(event: RunEvent) -> None:
        if event.kind == "handoff_started" and event.started == 2:
            both_started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: team.run("Research bees and calculate 2+2", runtime=runtime, on_event=on_event))
        await both_started.wait()
        tg.cancel_scope.cancel()
    assert sorted(runtime.entered) == [1, 2] and runtime.open == 0
