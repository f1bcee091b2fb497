"""Answering human checkpoints through MCP clients, on both protocol revisions: `answer_checkpoint`'s `round`
guard (a retried answer never answers the next round), and what a client that cannot elicit is told to do."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_team.handoffs import RunSettings
from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import TeamSpec
from support import HANG_GUARD

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REQUEST = "Research bees and write a short report"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _durable(state: Path, **settings: Any) -> Any:
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(**settings))
    return build_server(ModelSettings(model="offline"), team, durable=resolve(state_dir=state, environ={}))


async def _view(client: Client, run_id: str, wait: float = 0) -> dict[str, Any]:
    result = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": wait})
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content


async def _waiting_at_round(client: Client, run_id: str, round_: int) -> dict[str, Any]:
    deadline = time.monotonic() + HANG_GUARD
    while ((view := await _view(client, run_id)).get("waiting") or {}).get("round") != round_:
        assert time.monotonic() < deadline, f"hang guard: the run never waited in round {round_}"
        await anyio.sleep(0.02)
    return view


async def test_a_retried_revise_for_a_round_already_answered_is_refused(tmp_path: Path, mode: str) -> None:
    # A script's revise whose HTTP call timed out, tried again, answered round 2 with the same feedback: the plan
    # was revised twice. With `round`, the retry is refused, saying where the run waits now.
    async with Client(_durable(tmp_path, mode="planned", checkpoints=["plan"]), mode=mode) as client:
        run_id = (await client.call_tool("start_run", {"request": REQUEST})).structured_content["run_id"]  # type: ignore[index]
        view = await _waiting_at_round(client, run_id, 1)
        assert view["waiting"]["name"] == "plan"
        revise = {"run_id": run_id, "decision": "revise", "feedback": "also write the python code", "round": 1}
        first = await client.call_tool("answer_checkpoint", revise)
        assert not first.is_error, first.content
        await _waiting_at_round(client, run_id, 2)
        retried = await client.call_tool("answer_checkpoint", revise)
        assert retried.is_error, retried.content
        text = str(retried.content)
        assert "not waiting at a checkpoint in round 1" in text and "it waits at 'plan' in round 2" in text, text
        assert "nothing was answered" in text
        view = await _view(client, run_id)
        assert view["waiting"]["round"] == 2 and [c["round"] for c in view["checkpoints"]] == [1]
        named = {"run_id": run_id, "decision": "approve", "checkpoint": "plan", "round": 2}
        assert not (await client.call_tool("answer_checkpoint", named)).is_error
        done = await _view(client, run_id, wait=50)
    assert done["status"] == "complete", done
    assert [(c["round"], c["action"]) for c in done["checkpoints"]] == [(1, "revise"), (2, "approve")]


async def test_an_answer_without_a_round_answers_the_round_the_run_waits_at(tmp_path: Path, mode: str) -> None:
    async with Client(_durable(tmp_path, mode="planned", checkpoints=["plan"]), mode=mode) as client:
        run_id = (await client.call_tool("start_run", {"request": REQUEST})).structured_content["run_id"]  # type: ignore[index]
        await _waiting_at_round(client, run_id, 1)
        early = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve", "round": 2})
        assert early.is_error and "it waits at 'plan' in round 1" in str(early.content), early.content
        zero = await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve", "round": 0})
        assert zero.is_error and "round" in str(zero.content), zero.content
        assert not (await client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve"})).is_error
        done = await _view(client, run_id, wait=50)
    assert done["status"] == "complete", done
    assert [(c["round"], c["action"]) for c in done["checkpoints"]] == [(1, "approve")]


# --- a client that cannot elicit, under checkpoint_policy "fail": told the way that works where it is --------


async def _refused(app: Any, mode: str, **args: Any) -> str:
    async with Client(app, mode=mode) as client:  # no elicitation callback: the client declares none
        result = await client.call_tool("run_team", {"request": REQUEST, **args})
    assert result.is_error, result.content
    return str(result.content[0].text)  # type: ignore[union-attr]


async def test_on_a_durable_server_it_is_told_to_start_the_run_and_answer_with_the_tool(
    tmp_path: Path, mode: str
) -> None:
    # It was told to answer from a client that supports elicitation, or to pass approve= in Python: advice for
    # somebody else, while this server had a way for this very client.
    text = await _refused(_durable(tmp_path, checkpoints=["plan"]), mode)
    assert "does not support elicitation" in text, text
    assert "start the run with start_run, watch get_run until it shows `waiting`" in text, text
    assert "answer it with answer_checkpoint" in text and 'checkpoint_policy = "approve"' in text, text
    assert "Python" not in text and "mcp-team run" not in text, text


async def test_on_an_ephemeral_server_it_is_told_the_same_way_that_works_there(mode: str) -> None:
    # Every server with a model of its own runs start_run (in memory when --ephemeral), and answer_checkpoint
    # answers its runs: the way out is the same as on a durable server.
    app = build_server(ModelSettings(model="offline"), TeamSpec.of(DEFAULT_TEAM, RunSettings(checkpoints=["plan"])))
    text = await _refused(app, mode)
    assert "does not support elicitation" in text, text
    assert "start the run with start_run, watch get_run until it shows `waiting`" in text, text
    assert 'checkpoint_policy = "approve"' in text, text
    assert "Python" not in text and "mcp-team run" not in text, text
    # a call's own checkpoints are refused before the run starts, with the same fit
    plain = build_server(ModelSettings(model="offline"), TeamSpec.of(DEFAULT_TEAM, RunSettings()))
    text = await _refused(plain, mode, checkpoints=["plan"])
    assert "leave 'checkpoints' out, or start the run with start_run and answer them with answer_checkpoint" in text
