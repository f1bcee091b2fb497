"""Human checkpoints (issue 13) through an MCP client with an elicitation callback, on both revisions."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_team.handoffs import RunResult, RunSettings
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import TeamSpec
from support import HANG_GUARD, MCP_TEAM, clean_env, listed_runs

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]
REQUEST = "Research bees and write a short report"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def server(**settings: Any) -> Any:
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(**settings))
    return build_server(ModelSettings(model="offline"), team)


class Person:
    """An elicitation callback answering from a script, keeping what it was asked."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.requested_schema["properties"]["decision"]["enum"] == ["approve", "revise", "reject"]
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if isinstance(answer, str):  # decline or cancel
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)


async def run(client: Client, **args: Any) -> tuple[types.CallToolResult, RunResult | None]:
    result = await client.call_tool("run_team", {"request": REQUEST, **args})
    return result, None if result.is_error else RunResult.model_validate(result.structured_content)


async def test_approve_runs_the_plan_that_was_shown(mode: str) -> None:
    person = Person({"decision": "approve"})
    async with Client(server(mode="planned", checkpoints=["plan"]), mode=mode, elicitation_callback=person) as c:
        result, run_ = await run(c)
    assert run_ is not None and run_.status == "complete", result
    assert len(person.asked) == 1 and "t1. researcher" in person.asked[0] and "writer" in person.asked[0]
    (record,) = run_.checkpoints
    assert (record.name, record.action, record.answered_by) == ("plan", "approve", "person")
    assert record.waited_seconds >= 0 and "t1. researcher" in record.summary


async def test_revise_replans_and_the_new_plan_is_what_runs(mode: str) -> None:
    person = Person({"decision": "revise", "feedback": "also write the python code for it"}, {"decision": "approve"})
    async with Client(server(mode="planned", checkpoints=["plan"]), mode=mode, elicitation_callback=person) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "complete"
    assert "coder" not in person.asked[0] and "coder" in person.asked[1] and "(round 2)" in person.asked[1]
    assert run_.plan is not None and "coder" in [t.specialist for t in run_.plan.tasks]
    assert "coder" in [h.target for h in run_.handoffs]
    assert [c.action for c in run_.checkpoints] == ["revise", "approve"]


async def test_the_caller_hears_in_progress_that_the_run_waits_for_approval(mode: str) -> None:
    # Waiting at "plan" moved no handoff count, so no progress was sent: a client showing progress saw nothing
    # from the run until it ended, while the person took their time over the form.
    heard: list[str] = []
    heard_when_asked: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    class Watching(Person):
        async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            heard_when_asked.extend(heard)
            return await super().__call__(context, params)

    person = Watching({"decision": "approve"})
    async with Client(server(mode="planned", checkpoints=["plan"]), mode=mode, elicitation_callback=person) as c:
        result = await c.call_tool("run_team", {"request": REQUEST}, progress_callback=on_progress)
    assert not result.is_error, result.content
    assert heard_when_asked == ["checkpoint plan: waiting for approval"]
    assert heard[1] == "checkpoint plan: approve" and len(heard) == 2 + 2 * 2  # then two handoffs, each two


async def test_reject_before_the_writer_cancels_with_what_had_finished(mode: str) -> None:
    person = Person({"decision": "reject", "feedback": "the research is thin"})
    heard: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async with Client(server(), mode=mode, elicitation_callback=person) as c:
        result = await c.call_tool(
            "run_team", {"request": REQUEST, "checkpoints": ["before:writer"]}, progress_callback=on_progress
        )  # a per-call checkpoint
        run_ = RunResult.model_validate(result.structured_content)
    assert run_ is not None and run_.status == "cancelled"
    assert heard[-1] == "checkpoint before:writer: reject"  # told at once, as an approve is
    assert "writer will get this task" in person.asked[0]
    assert [(h.target, h.status) for h in run_.handoffs] == [("researcher", "completed"), ("writer", "refused")]
    assert "rejected at checkpoint 'before:writer': the research is thin" in run_.answer
    assert "## researcher" in run_.answer


async def test_a_revised_handoff_carries_the_feedback(mode: str) -> None:
    person = Person({"decision": "revise", "feedback": "keep it under 100 words"}, {"decision": "approve"})
    async with Client(server(checkpoints=["before:writer"]), mode=mode, elicitation_callback=person) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "complete"
    (writer,) = [h for h in run_.handoffs if h.target == "writer"]
    assert "The person approving this step asked: keep it under 100 words" in writer.task


async def test_a_form_that_comes_back_unusable_is_asked_again_not_taken_for_a_reject(mode: str) -> None:
    # An accepted form without a valid decision, or a revise without feedback, cancelled the run as rejected.
    person = Person({"decision": "maybe"}, {"decision": "revise"}, {"decision": "approve"})
    async with Client(server(checkpoints=["before:writer"]), mode=mode, elicitation_callback=person) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "complete", run_
    assert len(person.asked) == 3 and "could not be used" not in person.asked[0]
    assert "the decision must be approve, revise or reject, not 'maybe'. Please answer again." in person.asked[1]
    assert "with revise, say in the feedback what to change" in person.asked[2]
    assert [c.action for c in run_.checkpoints] == ["approve"]


async def test_a_form_unusable_every_time_is_a_reject_saying_why(mode: str) -> None:
    person = Person({}, {}, {})
    async with Client(server(checkpoints=["before:writer"]), mode=mode, elicitation_callback=person) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "cancelled" and len(person.asked) == 3
    assert "the form came back unusable 3 times" in run_.answer


async def test_declining_the_form_is_a_reject(mode: str) -> None:
    async with Client(server(checkpoints=["before:writer"]), mode=mode, elicitation_callback=Person("decline")) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "cancelled"


async def test_no_answer_within_the_timeout_cancels_the_run(mode: str) -> None:
    session: list[Client] = []

    async def late(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        with anyio.fail_after(HANG_GUARD):  # the person answers only once the server has given up waiting
            while not [r for r in await listed_runs(session[0]) if r["status"] == "cancelled"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)  # polls the server's listing: the test has nothing of the server to wait on
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    settings = RunSettings(checkpoints=["before:writer"], checkpoint_timeout=0.2)
    app = build_server(ModelSettings(model="offline"), TeamSpec.of(DEFAULT_TEAM, settings))
    async with Client(app, mode=mode, elicitation_callback=late) as c:
        session.append(c)
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "cancelled"
    assert "nobody answered checkpoint 'before:writer' within 0.2 s" in run_.answer
    assert [(c.action, c.answered_by) for c in run_.checkpoints] == [("timeout", "timeout")]


async def test_on_2026_07_28_a_person_has_the_whole_checkpoint_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A parked run gave up on its client's input_required round after JOB_TTL_SECONDS (600 s), whatever the team's
    # checkpoint_timeout: "nobody could be asked", so the policy decided (approved the plan under "approve") while
    # the person still had the form, and their answer then found the run gone.
    from mcp_team.server.client_features import sampling

    ttl = 0.3
    monkeypatch.setattr(sampling, "JOB_TTL_SECONDS", ttl)

    class Slow(Person):
        async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await anyio.sleep(3 * ttl)  # the person reads the plan for longer than a round is kept
            return await super().__call__(context, params)

    person = Slow({"decision": "reject", "feedback": "not this plan"})
    app = server(mode="planned", checkpoints=["plan"], checkpoint_policy="approve", checkpoint_timeout=60)
    async with Client(app, mode="auto", elicitation_callback=person) as c:
        result, run_ = await run(c)
    assert run_ is not None, result.content
    assert run_.status == "cancelled" and "not this plan" in run_.answer, run_.answer
    assert [(c.action, c.answered_by) for c in run_.checkpoints] == [("reject", "person")]


async def test_a_client_without_elicitation_fails_by_default_saying_so(mode: str) -> None:
    async with Client(server(checkpoints=["plan"]), mode=mode) as c:
        result, _ = await run(c)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "does not support elicitation" in text
    assert "checkpoint_policy" in text


async def test_a_client_without_elicitation_goes_on_under_the_approve_policy(mode: str) -> None:
    async with Client(server(checkpoints=["plan"], checkpoint_policy="approve"), mode=mode) as c:
        _, run_ = await run(c)
    assert run_ is not None and run_.status == "complete"
    assert [(c.action, c.answered_by) for c in run_.checkpoints] == [("approve", "policy")]


async def test_checkpoints_a_call_asks_for_without_elicitation_are_refused_before_it_starts(mode: str) -> None:
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings())
    async with Client(build_server(ModelSettings(model="offline"), team), mode=mode) as c:
        result, _ = await run(c, checkpoints=["plan"])
        assert await listed_runs(c) == []  # no run was started (it only failed at its first checkpoint)
    assert result.is_error and "'checkpoints' need a client that can answer them" in result.content[0].text  # type: ignore[union-attr]
    assert "leave 'checkpoints' out" in result.content[0].text  # type: ignore[union-attr]


async def test_a_checkpoint_naming_no_member_is_refused(mode: str) -> None:
    async with Client(server(), mode=mode) as c:
        result, _ = await run(c, checkpoints=["before:poet"])
    assert result.is_error and "there is no member 'poet'" in result.content[0].text  # type: ignore[union-attr]


# --- the CLI -------------------------------------------------------------------------------------------


def cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_TEAM, "run", *args], capture_output=True, text=True, timeout=HANG_GUARD,
        env=clean_env(MCP_TEAM_MODEL="offline"), **kw,
    )  # fmt: skip


def test_the_cli_without_a_terminal_follows_the_policy(tmp_path: Path) -> None:
    proc = cli("--checkpoint", "plan", "--mode", "planned", REQUEST, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert "not attached to a terminal" in proc.stdout and "checkpoint_policy" in proc.stdout
    assert "Run it on a terminal to answer" in proc.stdout and "Python" not in proc.stdout  # advice for the CLI

    team = tmp_path / "team.toml"
    subprocess.run([MCP_TEAM, "init", str(team)], check=True, env=clean_env(), timeout=HANG_GUARD)
    policy = '[supervisor]\ncheckpoints = ["before:writer"]\ncheckpoint_policy = "approve"\n'
    team.write_text(team.read_text().replace("[supervisor]\n", policy, 1))
    proc = cli("--team", str(team), "--json", REQUEST, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert [(c["name"], c["answered_by"]) for c in json.loads(proc.stdout)["checkpoints"]] == [
        ("before:writer", "policy")
    ]


def test_a_bad_checkpoint_is_a_usage_error_on_the_cli_and_in_the_team_file(tmp_path: Path) -> None:
    proc = cli("--checkpoint", "before:poet", REQUEST)
    assert proc.returncode == 2 and "there is no member 'poet'" in proc.stderr
    team = tmp_path / "team.toml"
    subprocess.run([MCP_TEAM, "init", str(team)], check=True, env=clean_env(), timeout=HANG_GUARD)
    team.write_text(team.read_text().replace("[supervisor]\n", '[supervisor]\ncheckpoints = ["after:x"]\n', 1))
    check = subprocess.run(
        [MCP_TEAM, "check", "--team", str(team)], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env()
    )
    assert check.returncode == 2 and "supervisor.checkpoints: checkpoint 'after:x'" in check.stderr + check.stdout


def test_the_cli_asks_on_a_terminal_and_runs_the_revised_plan() -> None:
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [MCP_TEAM, "run", "--json", "--mode", "planned", "--checkpoint", "plan", REQUEST],
        stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(MCP_TEAM_MODEL="offline"),
    )  # fmt: skip
    os.close(terminal)
    # Typed ahead: the terminal keeps the lines until the run reads them.
    os.write(controller, b"r\nalso write the python code for it\na\n")
    try:
        out, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        os.close(controller)
    assert proc.returncode == 0, err
    assert "checkpoint plan" in err and "[a]pprove, [r]evise or reject" in err
    result = json.loads(out)
    assert [c["action"] for c in result["checkpoints"]] == ["revise", "approve"]
    assert "coder" in [h["target"] for h in result["handoffs"]]


@pytest.mark.anyio
async def test_every_checkpoint_is_a_span_with_its_answer_and_wait(spans) -> None:
    from mcp_team.handoffs import Team
    from mcp_team.handoffs.checkpoints import Checkpoint, Decision
    from mcp_team.llm import ModelSet
    from mcp_team.llm.offline import OfflineModel

    async def approve(checkpoint: Checkpoint) -> Decision:
        return Decision(action="approve")

    team = Team(ModelSet.single(OfflineModel()))
    result = await team.run(REQUEST, mode="planned", checkpoints=["plan", "before:writer"], approve=approve)

    assert [(c.name, c.action) for c in result.checkpoints] == [("plan", "approve"), ("before:writer", "approve")]
    root = spans.one("invoke_agent supervisor")
    for name in ("plan", "before:writer"):
        span = spans.one(f"checkpoint {name}")
        assert span.context.trace_id == root.context.trace_id
        assert spans.attr(span, "mcp_team.checkpoint.action") == "approve"
        assert spans.attr(span, "mcp_team.checkpoint.answered_by") == "person"
        assert isinstance(spans.attr(span, "mcp_team.checkpoint.waited_seconds"), float)


@pytest.mark.anyio
async def test_in_adaptive_mode_the_plan_checkpoint_holds_the_first_handoffs_until_approved() -> None:
    from mcp_team.handoffs import Team
    from mcp_team.handoffs.checkpoints import Checkpoint, Decision
    from mcp_team.llm import ModelSet
    from mcp_team.llm.offline import OfflineModel

    asked: list[Checkpoint] = []

    async def person(checkpoint: Checkpoint) -> Decision:
        asked.append(checkpoint)
        if len(asked) == 1:
            return Decision(action="revise", feedback="research the hive first")
        return Decision(action="approve")

    result = await Team(ModelSet.single(OfflineModel())).run(REQUEST, checkpoints=["plan"], approve=person)

    assert [(c.name, c.round) for c in asked] == [("plan", 1), ("plan", 2)]
    assert "1. researcher:" in asked[0].summary
    assert result.status == "complete"
    assert [h.target for h in result.handoffs] == ["researcher", "writer"]  # the held turn never ran
