"""Human checkpoints in durable runs (issue 13) through MCP clients of a `serve` subprocess: a run waiting at
"plan" survives kill -9 and a restart, waits again, and is answered with `answer_checkpoint`; a checkpoint
answered before the kill is not asked again after the restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]
LAUNCHER = str(Path(__file__).parents[1] / "support" / "logged_serve.py")
REQUEST = "Research bees, calculate 2+2, write a short report and review it"


def _params(state: Path, *args: str) -> StdioServerParameters:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="300", MCP_TEAM_STATE_DIR=str(state),
                    MCP_TEAM_TEST_CALL_LOG=str(state / "calls.log"))  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=[LAUNCHER, "serve", *args], env=env)


def _calls(state: Path) -> list[dict[str, Any]]:
    log = state / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _record(state: Path) -> dict[str, Any] | None:
    """The one run's record in the run store, read as another process would."""
    try:
        with sqlite3.connect(state / "runs.sqlite") as conn:
            rows = conn.execute("SELECT record FROM mcp_team_runs").fetchall()
    except sqlite3.OperationalError:  # not created yet, or busy
        return None
    return json.loads(rows[0][0]) if rows else None


async def _until(what: str, found: Any) -> Any:
    deadline = time.monotonic() + HANG_GUARD
    while not (value := found()):
        assert time.monotonic() < deadline, f"hang guard: still waiting for {what}"
        await anyio.sleep(0.02)
    return value


def _kill(state: Path) -> int:
    """Kill -9 the server (its pid from the call log: the planner's call was its first)."""
    pid = int(_calls(state)[0]["pid"])
    os.kill(pid, signal.SIGKILL)
    return pid


async def _first_server(state: Path, person: Any, stop_when: Any, *args: str) -> None:
    """Start the run with run_team on a client that elicits through `person`; kill the server once `stop_when()`."""
    with open(state / "serve1.err", "w") as errlog, contextlib.suppress(Exception, BaseExceptionGroup):  # noqa: ASYNC230
        # (the server dies under the client: its errors are expected)
        client = Client(stdio_client(_params(state, *args), errlog=cast(TextIO, errlog)), mode="legacy",
                        elicitation_callback=person)  # fmt: skip
        async with client, anyio.create_task_group() as tg:

            async def call() -> None:
                with contextlib.suppress(Exception):
                    await client.call_tool("run_team", {"request": REQUEST, "mode": "planned", "checkpoints": ["plan"]})

            tg.start_soon(call)
            await _until("the moment to kill the server", stop_when)
            _kill(state)
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _second_server(state: Path, *args: str) -> Any:
    """A restarted server and a client without elicitation (it cannot be asked: only the tool answers)."""
    with open(state / "serve2.err", "w") as errlog:  # noqa: ASYNC230
        async with Client(stdio_client(_params(state, *args), errlog=cast(TextIO, errlog)), mode="legacy") as client:
            yield client


async def _get_run(client: Client, run_id: str, wait: float = 0) -> dict[str, Any]:
    result = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": wait})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_a_run_waiting_at_plan_survives_kill_9_and_is_answered_with_the_tool(tmp_path: Path) -> None:
    asked: list[str] = []

    async def nobody_answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params.message)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def waiting() -> dict[str, Any] | None:
        record = _record(tmp_path)
        return record if record is not None and record.get("waiting") and asked else None

    await _first_server(tmp_path, nobody_answers, waiting)
    before = _record(tmp_path)
    assert before is not None and before["status"] == "running" and before["waiting"]["name"] == "plan"
    summary = before["waiting"]["summary"]
    assert summary in asked[0]  # the session was asked the same question the record shows
    planned_before = [c for c in _calls(tmp_path) if c["member"] == "planner"]
    shown = await anyio.run_process([MCP_TEAM, "runs", "show", before["run_id"]],
                                    env=clean_env(MCP_TEAM_STATE_DIR=str(tmp_path)))  # fmt: skip
    assert f"waiting at checkpoint plan (answer_checkpoint):\n{summary}" in shown.stdout.decode()

    async with _second_server(tmp_path) as client:
        run_id = before["run_id"]
        # As a client would: get_run shows the run waiting, so it is answered, at once. Its record says so from
        # before the restart, while the restarted server replays it up to its checkpoint: the answer waits for
        # that (it was refused, "not waiting ... (it waits at 'plan' in round 1)", until the replay was back).
        view = await _get_run(client, run_id)
        wrong = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve",
                                                             "checkpoint": "before:writer"})  # fmt: skip
        assert wrong.is_error and "not waiting at checkpoint 'before:writer'" in str(wrong.content)
        answered = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve"})
        assert not answered.is_error, answered.content
        extra = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve", "x": 1})
        assert extra.is_error and "'x'" in str(extra.content), extra.content
        revise = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "revise"})
        assert revise.is_error and "'feedback' is empty" in str(revise.content), revise.content
        assert view["status"] == "running" and view["waiting"]["name"] == "plan", view
        assert view["waiting"]["summary"] == summary
        shown = answered.structured_content or {}  # the record once the run took the answer, not still waiting
        assert shown.get("status") != "running" or (shown.get("waiting") or {}).get("name") != "plan", shown
        final = await _until("the run to finish", lambda: _record(tmp_path) if
                             (_record(tmp_path) or {}).get("status") != "running" else None)  # fmt: skip
        view = await _get_run(client, run_id)
    assert final["status"] == "complete", final.get("reason")
    assert view["waiting"] is None
    result = final["result"]
    plan = "\n".join(f"{t['id']}. {t['specialist']}: {t['description']}" +
                     (f" (after {', '.join(t['depends_on'])})" if t["depends_on"] else "")
                     for t in result["plan"]["tasks"])  # fmt: skip
    assert plan == summary  # the plan that ran is the one that was approved
    assert [h["target"] for h in result["handoffs"]] == [t["specialist"] for t in result["plan"]["tasks"]]
    answers = [(c["name"], c["action"], c["answered_by"]) for c in result["checkpoints"]]
    assert answers == [("plan", "approve", "person")]
    planned_after = [c for c in _calls(tmp_path) if c["member"] == "planner"]
    assert planned_after == planned_before, "the planner was asked again: its recorded answer was not replayed"


async def test_a_checkpoint_answered_before_the_kill_is_not_asked_again(tmp_path: Path) -> None:
    asked: list[str] = []

    async def approves(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(cast(types.ElicitRequestFormParams, params).message)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    def two_done() -> bool:
        record = _record(tmp_path) or {}
        done = [h for h in (record.get("result") or {}).get("handoffs", []) if h["status"] == "completed"]
        return len(done) >= 2

    await _first_server(tmp_path, approves, two_done)
    before = _record(tmp_path)
    assert before is not None and before["status"] == "running", "the run ended before the kill"
    assert len(asked) == 1
    async with _second_server(tmp_path) as client:  # it cannot elicit: were plan asked again, the run would wait
        final = await _until("the resumed run to finish", lambda: _record(tmp_path) if
                             (_record(tmp_path) or {}).get("status") != "running" else None)  # fmt: skip
        view = await _get_run(client, before["run_id"])
    assert final["status"] == "complete", final.get("reason")
    assert view["waiting"] is None
    checkpoints = final["result"]["checkpoints"]
    assert [(c["name"], c["round"], c["action"]) for c in checkpoints] == [("plan", 1, "approve")], checkpoints
    pids = {c["pid"] for c in _calls(tmp_path)}
    assert len(pids) == 2, "the restarted server called no model: the run was not resumed"


# --- in process: start_run with the team's checkpoints, answered with the tool ----------------------------


def _durable_server(state: Path, **settings: Any) -> Any:
    from mcp_team.handoffs import RunSettings
    from mcp_team.llm.settings import ModelSettings
    from mcp_team.runs import resolve
    from mcp_team.server.app import build_server
    from mcp_team.specialists import DEFAULT_TEAM
    from mcp_team.teamfile.loading import TeamSpec

    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(**settings))
    return build_server(ModelSettings(model="offline"), team, durable=resolve(state_dir=state, environ={}))


async def _answer_when_waiting(client: Client, run_id: str, checkpoint: str, decision: str, **extra: Any) -> None:
    deadline = time.monotonic() + HANG_GUARD
    args = {"run_id": run_id, "decision": decision, "checkpoint": checkpoint, **extra}
    while (await client.call_tool("answer_checkpoint", args)).is_error:
        assert time.monotonic() < deadline, f"hang guard: the run never waited at {checkpoint}"
        await anyio.sleep(0.02)


async def test_concurrent_checkpoints_of_a_started_run_are_each_answered_with_the_tool(tmp_path: Path) -> None:
    server = _durable_server(tmp_path, checkpoints=["before:researcher", "before:analyst"])
    async with Client(server, mode="legacy") as client:  # start_run: no session is attached to the run
        started = await client.call_tool("start_run", {"request": REQUEST})
        run_id = started.structured_content["run_id"]  # type: ignore[index]
        view = await _until_waiting(client, run_id)
        assert view["waiting"]["name"] in ("before:researcher", "before:analyst")
        shown = json.loads((await client.read_resource(f"team://runs/{run_id}")).contents[0].text)  # type: ignore[union-attr]
        assert (
            shown["waiting"]["name"] == view["waiting"]["name"] and "will get this task" in shown["waiting"]["summary"]
        )
        # both branches wait at once; each is answered by name, the second first
        await _answer_when_waiting(client, run_id, "before:analyst", "revise", feedback="use metric units")
        await _answer_when_waiting(client, run_id, "before:analyst", "approve")
        await _answer_when_waiting(client, run_id, "before:researcher", "approve")
        done = await _get_run(client, run_id, wait=50)
    assert done["status"] == "complete", done
    assert done["waiting"] is None
    answers = sorted((c["name"], c["round"], c["action"]) for c in done["checkpoints"])
    assert answers == [("before:analyst", 1, "revise"), ("before:analyst", 2, "approve"),
                       ("before:researcher", 1, "approve")]  # fmt: skip
    analyst = next(h for h in done["handoffs"] if h["target"] == "analyst")
    assert "use metric units" in analyst["task"]


async def test_an_answer_given_as_the_run_comes_to_its_checkpoint_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoints this process's runs wait at are looked at first; a run that comes to its checkpoint while its
    record is read next (a resumed run's replay on a busy machine: the kill matrix, at load 9) is answered there,
    not refused as waiting on another replica. The first look is made to miss here, as it did then."""
    from mcp_team.runs import approvals

    answer = approvals.Board.answer
    missed: list[str] = []

    def first_look_misses(board: Any, run_id: str, *args: Any) -> Any:
        if not missed:
            missed.append(run_id)
            raise approvals.NotWaiting(run_id)
        return answer(board, run_id, *args)

    async with Client(_durable_server(tmp_path, mode="planned", checkpoints=["plan"]), mode="legacy") as client:
        started = await client.call_tool("start_run", {"request": REQUEST})
        run_id = started.structured_content["run_id"]  # type: ignore[index]
        await _until_waiting(client, run_id)
        monkeypatch.setattr(approvals.Board, "answer", first_look_misses)
        answered = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve"})
        assert not answered.is_error, answered.content
        done = await _get_run(client, run_id, wait=50)
    assert missed == [run_id]
    assert done["status"] == "complete", done
    assert [(c["name"], c["action"]) for c in done["checkpoints"]] == [("plan", "approve")]


async def test_a_reject_through_the_tool_cancels_the_run_and_a_finished_run_cannot_be_answered(tmp_path: Path) -> None:
    async with Client(_durable_server(tmp_path, mode="planned", checkpoints=["plan"]), mode="legacy") as client:
        started = await client.call_tool("start_run", {"request": REQUEST})
        run_id = started.structured_content["run_id"]  # type: ignore[index]
        await _answer_when_waiting(client, run_id, "plan", "reject", feedback="not now")
        done = await _get_run(client, run_id, wait=50)
        assert done["status"] == "cancelled" and "not now" in done["stopped_by"], done
        late = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve"})
        assert (
            late.is_error and "is not waiting at a checkpoint" in str(late.content) and "cancelled" in str(late.content)
        )
        missing = await client.call_tool("answer_checkpoint", {"run_id": "nope", "decision": "approve"})
        assert missing.is_error and "no run 'nope'" in str(missing.content)


async def test_a_running_run_shows_the_answers_given_so_far(tmp_path: Path) -> None:
    # A running run's record had no checkpoints: waiting at round 2 of "plan", get_run showed none answered,
    # and answer_checkpoint returned a record without the answer it had just given.
    server = _durable_server(tmp_path, mode="planned", checkpoints=["plan"])
    async with Client(server, mode="legacy") as client:
        run_id = (await client.call_tool("start_run", {"request": REQUEST})).structured_content["run_id"]  # type: ignore[index]
        await _until_waiting(client, run_id)
        args = {"run_id": run_id, "decision": "revise", "feedback": "also write the python code"}
        answered = (await client.call_tool("answer_checkpoint", args)).structured_content or {}
        assert [(c["name"], c["round"], c["action"]) for c in answered["checkpoints"]] == [("plan", 1, "revise")]
        view = await _until_waiting(client, run_id)
        assert view["waiting"]["round"] == 2 and [c["feedback"] for c in view["checkpoints"]] == [args["feedback"]]
        await _answer_when_waiting(client, run_id, "plan", "approve")
        done = await _get_run(client, run_id, wait=50)
    assert done["status"] == "complete", done
    assert [(c["round"], c["action"]) for c in done["checkpoints"]] == [(1, "revise"), (2, "approve")]


async def test_the_run_listing_shows_which_runs_wait_at_which_checkpoint(tmp_path: Path) -> None:
    # team://runs listed a waiting run as "running" like any other: a client saw which runs need a person only by
    # reading each run's record.
    async def listed(round_: int | None) -> dict[str, Any]:
        deadline = time.monotonic() + HANG_GUARD
        while True:
            text = (await client.read_resource("team://runs")).contents[0].text  # type: ignore[union-attr]
            (run,) = [r for r in json.loads(text)["runs"] if r["run_id"] == run_id]
            if (run["waiting"] or {}).get("round") == round_ and (round_ or run["status"] != "running"):
                return dict(run)
            assert time.monotonic() < deadline, f"hang guard: the listing never showed round {round_}, but {run}"
            await anyio.sleep(0.02)

    server = _durable_server(tmp_path, mode="planned", checkpoints=["plan"])
    async with Client(server, mode="legacy") as client:
        run_id = (await client.call_tool("start_run", {"request": REQUEST})).structured_content["run_id"]  # type: ignore[index]
        asked = (await _until_waiting(client, run_id))["waiting"]["summary"]
        first = await listed(1)
        assert first["status"] == "running" and first["waiting"]["name"] == "plan"
        summary = first["waiting"]["summary"]  # in short: the listing holds 50 runs; the record has it whole
        assert summary == asked or (len(summary) == 200 and summary.endswith("…") and asked.startswith(summary[:-1]))
        args = {"run_id": run_id, "decision": "revise", "feedback": "also write the python code"}
        assert not (await client.call_tool("answer_checkpoint", args)).is_error
        assert (await listed(2))["waiting"]["name"] == "plan"
        await _answer_when_waiting(client, run_id, "plan", "approve")
        done = await listed(None)
    assert done["status"] == "complete" and done["waiting"] is None, done


async def _until_waiting(client: Client, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + HANG_GUARD
    while not (view := await _get_run(client, run_id)).get("waiting"):
        assert time.monotonic() < deadline, "hang guard: the run never waited at a checkpoint"
        await anyio.sleep(0.02)
    return view


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_run_team_on_a_durable_server_asks_the_session_and_keeps_the_run(tmp_path: Path, mode: str) -> None:
    asked: list[str] = []

    async def approves(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(cast(types.ElicitRequestFormParams, params).message)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    server = _durable_server(tmp_path, mode="planned", checkpoints=["plan"])
    async with Client(server, mode=mode, elicitation_callback=approves) as client:
        result = await client.call_tool("run_team", {"request": REQUEST, "thread": "t1"})  # a thread: durable only
        assert not result.is_error, result.content
        run = result.structured_content
        assert run is not None and run["status"] == "complete"
        kept = await _get_run(client, run["run_id"])
    assert len(asked) == 1 and "approve the plan" in asked[0]
    assert [(c["name"], c["answered_by"]) for c in run["checkpoints"]] == [("plan", "person")]
    assert kept["resumable"] is True and kept["thread"] == "t1" and kept["status"] == "complete"


async def test_the_checkpoint_timeout_still_applies_after_a_restart(tmp_path: Path) -> None:
    """The run waits at plan, the server is killed, and nobody answers after the restart: the timeout, counted
    from the first ask, ends the run cancelled, its checkpoint recorded as timed out."""
    team = tmp_path / "team.toml"
    await anyio.run_process([MCP_TEAM, "init", str(team)], env=clean_env())
    team.write_text(team.read_text().replace("[supervisor]\n", "[supervisor]\ncheckpoint_timeout = 3\n", 1))
    asked: list[str] = []

    async def nobody_answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(cast(types.ElicitRequestFormParams, params).message)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def waiting() -> bool:
        return bool((_record(tmp_path) or {}).get("waiting")) and bool(asked)

    await _first_server(tmp_path, nobody_answers, waiting, "--team", str(team))
    async with _second_server(tmp_path, "--team", str(team)):
        final = await _until("the resumed run to time out", lambda: _record(tmp_path) if
                             (_record(tmp_path) or {}).get("status") != "running" else None)  # fmt: skip
    assert final["status"] == "cancelled", final
    result = final["result"]
    assert "nobody answered checkpoint 'plan' within 3 s" in result["stopped_by"]
    assert [(c["name"], c["action"], c["answered_by"]) for c in result["checkpoints"]] == [
        ("plan", "timeout", "timeout")
    ]
    assert final["waiting"] is None


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_run_team_as_a_task_waits_at_its_checkpoint_for_the_tool(tmp_path: Path, mode: str) -> None:
    from support.task_client import TaskClient, Tasks

    async with Client(_durable_server(tmp_path), mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        with pytest.raises(Exception, match="there is no member 'poet'"):
            await tasks.create({"request": REQUEST, "checkpoints": ["before:poet"]})
        created = await tasks.create({"request": REQUEST, "mode": "planned", "checkpoints": ["plan"]})
        run_id = created["taskId"]  # the task id is the run id
        view = await _until_waiting(client, run_id)
        assert view["waiting"]["name"] == "plan"
        # the task's own status says so: it read "running: 0 handoff(s) finished, 0 in progress", and a client that
        # follows tasks/get never learned that the run would only time out unless someone answered
        waiting = (await tasks.get(run_id))["statusMessage"]
        assert "waiting at checkpoint 'plan'" in waiting and "answer_checkpoint" in waiting, waiting
        await _answer_when_waiting(client, run_id, "plan", "approve")
        task, result = await tasks.final(run_id)
    assert task["status"] == "completed", task
    run = result["structuredContent"]
    assert run["status"] == "complete" and [c["action"] for c in run["checkpoints"]] == ["approve"]
