"""Planned mode: a planner writes an inspectable plan, it is validated, then executed as a DAG.

Ready tasks run concurrently as soon as their dependencies finish (no waves); each task gets its
dependencies' results as context; a task whose dependency failed is skipped and reported.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection

import anyio
from pydantic import ValidationError

from mcp_team.errors import BudgetExhausted, McpTeamError
from mcp_team.handoffs.admission import admit, not_run, note_fan_out
from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.execution import execute, in_handoff_order
from mcp_team.handoffs.prompts import PLANNER_INSTRUCTIONS, describe_team
from mcp_team.handoffs.review import revise_in_plan
from mcp_team.handoffs.runtime import Branch
from mcp_team.handoffs.schema import Handoff, HandoffRecord, Plan, PlanTask, validation_problems
from mcp_team.llm import PLANNER, Message, ModelError, ModelRequest, ToolDefinition, ToolResultBlock, ToolUseBlock
from mcp_team.llm.text_calls import read_calls
from mcp_team.telemetry import spans

REVISE_MARKER = "A person reviewing this plan asked for changes:"


class PlanError(McpTeamError):
    """The planner could not produce a valid plan (after one repair round)."""


def validate_plan(plan: Plan, team: Collection[str]) -> list[str]:
    """Every problem with `plan`, in words; empty when it can run."""
    problems = []
    if not plan.tasks:
        problems.append("the plan has no tasks")
    ids = [t.id for t in plan.tasks]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"task id '{dup}' is used more than once")
    for t in plan.tasks:
        if t.specialist not in team:
            problems.append(
                f"task '{t.id}' names unknown specialist '{t.specialist}' (the team: {', '.join(sorted(team))})"
            )
        if not t.description.strip():
            problems.append(f"task '{t.id}' has an empty description")
        for dep in t.depends_on:
            if dep not in ids:
                problems.append(f"task '{t.id}' depends on unknown task '{dep}'")
            elif dep == t.id:
                problems.append(f"task '{t.id}' depends on itself")
    if cycle := _find_cycle(plan):
        problems.append("the dependencies form a cycle: " + " -> ".join(cycle))
    return problems


def _find_cycle(plan: Plan) -> list[str]:
    deps = {t.id: [d for d in t.depends_on if d != t.id] for t in plan.tasks}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for dep in deps.get(node, []):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep] if dep in path else [node, dep]
            if dep in deps and state.get(dep) is None and (found := visit(dep, [*path, dep])):
                return found
        state[node] = 2
        return []

    for node in deps:
        if state.get(node) is None and (found := visit(node, [node])):
            return found
    return []


PLAN_TOOL = ToolDefinition(name="submit_plan", description="Submit the plan.", input_schema=Plan.model_json_schema())


async def make_plan(ctx: RunContext, feedback: str = "") -> Plan:
    """Ask the planner for a plan; one repair round if it is invalid. Raises `PlanError`.

    `feedback`: what a person asked to change in the previous plan (a `plan` checkpoint's revise)."""
    system = PLANNER_INSTRUCTIONS.format(team=describe_team(ctx.config.workers))
    messages = [Message(role="user", content=ctx.config.request)]
    if feedback and ctx.plan is not None:  # the earlier plan, and the person's answer to it
        earlier = ToolUseBlock(id="earlier_plan", name="submit_plan", input=ctx.plan.model_dump())
        answer = f"{REVISE_MARKER} {feedback}\nSubmit a revised plan."
        messages += [
            Message(role="assistant", content=[earlier]),
            Message(role="user", content=[ToolResultBlock(tool_use_id=earlier.id, content=answer, is_error=True)]),
        ]
    first: list[str] = []  # the first plan's problems, when it went back for repair
    with spans.plan_span("supervisor"):
        for round_ in (1, 2):
            request = ModelRequest(system=system, messages=messages, tools=[PLAN_TOOL], phase="plan", member=PLANNER)
            try:
                response = await ctx.supervisor_call(request)
            except ModelError as exc:
                raise PlanError(f"the planner's model call failed: {exc.message}") from exc
            except BudgetExhausted as exc:
                raise PlanError(f"the planner's model call failed: {exc.budget}") from exc
            use = next((u for u in response.tool_uses if u.name == "submit_plan"), None)
            if use is None:
                problems = _not_submitted(response.text)
            else:
                try:
                    plan = Plan.model_validate(use.input)
                    problems = validate_plan(plan, ctx.config.team)
                except ValidationError as exc:
                    problems = validation_problems(exc)
                if problems and use.from_text:  # say so: the fix may be to call the tool
                    problems = [f"{p} (in the plan written as text in your reply)" for p in problems]
                if not problems:
                    if first:  # the repair worked: the first plan's problems are on record, recovered
                        reason = "the first plan went back for repair: " + "; ".join(first)
                        ctx.fail("invalid_plan", "supervisor", reason, recovered=True)
                    return plan
            if round_ == 2:
                break
            first = problems
            messages.append(Message(role="assistant", content=list(response.content)))
            feedback = "The plan is invalid:\n- " + "\n- ".join(problems) + "\nSubmit a corrected plan."
            if use is not None:
                messages.append(
                    Message(role="user", content=[ToolResultBlock(tool_use_id=use.id, content=feedback, is_error=True)])
                )
            else:
                messages.append(Message(role="user", content=feedback))
    raise PlanError("the planner did not produce a valid plan after one repair round: " + "; ".join(problems))


def _not_submitted(text: str) -> list[str]:
    """Why a reply without a submit_plan call has no plan: it wrote the plan as text (and what kept it from being
    read), or it has none at all."""
    reading = read_calls(text, [PLAN_TOOL])
    if not reading.calls:
        return ["no plan was submitted: call submit_plan with the plan"]
    wrong = "; ".join(reading.problems) or "calls written as text are not read for this model (tool_calls = native)"
    return [f"the plan was written as text instead of being submitted with the submit_plan tool, and could not "
            f"be read from it: {wrong}. Call submit_plan with the plan"]  # fmt: skip


async def run_plan(ctx: RunContext, plan: Plan) -> None:
    """Execute the plan's tasks as a DAG; records land in `ctx.records`.

    The first tasks (no dependencies) are admitted in plan order before any runs; a task that
    waited for its dependencies is admitted when it starts, through the runtime (`contested`).
    """
    done = {t.id: anyio.Event() for t in plan.tasks}
    outcome: dict[str, HandoffRecord] = {}
    # Each task's number is its place in the plan, fixed before any task runs (not when it starts).
    seqs = {t.id: ctx.last_seq + i for i, t in enumerate(plan.tasks, start=1)}
    ctx.last_seq += len(plan.tasks)

    def handoff_for(task: PlanTask) -> Handoff:
        return Handoff(
            id=f"h{seqs[task.id]}",
            seq=seqs[task.id],
            run_id=ctx.config.run_id,
            target=task.specialist,
            call_id=task.id,
            task=task.description,
            context="\n\n".join(f"Result of {d} ({outcome[d].target}):\n{outcome[d].output}" for d in task.depends_on),
        )

    async def run_task(task: PlanTask, admitted: Handoff | None) -> None:
        try:
            if admitted is not None:
                outcome[task.id] = await execute(ctx, admitted)
                return
            for dep in task.depends_on:
                await done[dep].wait()
            handoff = handoff_for(task)
            if failed := [d for d in task.depends_on if outcome[d].status != "completed"]:
                outcome[task.id] = _skip(ctx, handoff, failed, outcome)
            else:
                outcome[task.id] = await execute(ctx, handoff, contested=True)
                if ctx.config.team[task.specialist].returns_verdict:  # REVISE sends its input's authors back to work
                    authors = [outcome[d] for d in task.depends_on]
                    run = functools.partial(execute, ctx, contested=True)
                    outcome[task.id] = await revise_in_plan(ctx, outcome[task.id], authors, run)
        finally:
            done[task.id].set()

    with in_handoff_order(ctx):
        starts: list[Branch] = []
        for task in plan.tasks:
            # Every task's branch starts now, in plan order (a durable runtime needs a fixed order): one that
            # depends on others waits for them inside its branch.
            handoff = handoff_for(task) if not task.depends_on else None
            if handoff is not None and (refused := admit(ctx, handoff, dedupe=False)) is not None:
                outcome[task.id] = refused
                done[task.id].set()
                continue
            key = f"{ctx.config.run_id}/h{seqs[task.id]}"  # as `execution.branch_key` names the task's handoff
            starts.append(Branch(key, functools.partial(run_task, task, handoff)))
        if starts:
            await ctx.config.runtime.branches(starts)
    note_fan_out(ctx, "tasks of the plan", [outcome.get(t.id) for t in plan.tasks], _widest_level(plan))


def _widest_level(plan: Plan) -> int:
    """The most tasks at one depth of the DAG: how many become ready together, at most."""
    deps = {t.id: t.depends_on for t in plan.tasks}
    depth: dict[str, int] = {}

    def depth_of(task_id: str) -> int:
        if task_id not in depth:
            depth[task_id] = 1 + max((depth_of(d) for d in deps[task_id]), default=-1)
        return depth[task_id]

    levels = Counter(depth_of(t) for t in deps)
    return max(levels.values(), default=0)


def _skip(ctx: RunContext, handoff: Handoff, failed: list[str], outcome: dict[str, HandoffRecord]) -> HandoffRecord:
    reason = "skipped because its dependencies did not complete: " + ", ".join(
        f"{d} ({outcome[d].target}: {outcome[d].status})" for d in failed
    )
    ctx.fail("dependency_failed", handoff.target, reason, handoff.task, handoff.id)
    return not_run(ctx, handoff, "skipped", "dependency_failed", reason)
