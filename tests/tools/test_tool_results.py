"""What a host reads (issue 35): a tool result's first text block is the answer, under a line with the run's
status (a partial answer ending with what is missing; a run that goes on saying how to follow it), and the
structured result stays in `structuredContent` and, as JSON, in the second text block. Through the in-process MCP
client, on both protocol revisions: `run_team`, a specialist's tool, `start_run` and `get_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REQUEST = "Research bees, calculate 2+2, write a short report and review it"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def texts(result: Any) -> tuple[str, dict[str, Any]]:
    """The first text block, and the second parsed as JSON (checked to be the structured result)."""
    assert not result.is_error, result.content
    first, second = result.content
    data = json.loads(second.text)
    assert data == result.structured_content
    return first.text, data


async def test_run_team_answers_first_in_its_text(mode: str) -> None:
    async with Client(build_server(ModelSettings(model="offline")), mode=mode) as client:  # type: ignore[call-arg]
        answer, run = texts(await client.call_tool("run_team", {"request": REQUEST}))
    head, _, body = answer.partition("\n\n")
    total = run["usage"]["total"]
    tokens = total["input_tokens"] + total["output_tokens"]
    assert head == f"Complete (run {run['run_id']}, 4 handoffs, {tokens:,} tokens, cost unknown)"
    assert body == run["answer"] and not answer.lstrip().startswith("{")


async def test_a_partial_run_says_so_and_what_is_missing_first(mode: str) -> None:
    settings = ModelSettings(model="offline", faults="server_error:analyst")  # type: ignore[call-arg]
    async with Client(build_server(settings), mode=mode) as client:
        answer, run = texts(await client.call_tool("run_team", {"request": REQUEST}))
    assert run["status"] == "partial"
    assert answer.startswith("Partial: some work failed, and the answer ends with what is missing (run ")
    assert "Incomplete. This answer is missing:\n- analyst" in answer and "server_error" in answer


async def test_a_specialist_tool_answers_first_in_its_text(mode: str) -> None:
    async with Client(build_server(ModelSettings(model="offline")), mode=mode) as client:  # type: ignore[call-arg]
        answer, result = texts(await client.call_tool("analyst", {"task": "Calculate 12*(3+4)/2"}))
    assert answer.startswith("analyst: completed (2 turns, ") and answer.endswith(result["output"])
    assert "12*(3+4)/2 = 42" in answer


async def test_start_run_says_how_to_follow_the_run_and_get_run_gives_its_answer(tmp_path: Path, mode: str) -> None:
    settings = ModelSettings(model="offline", offline_latency_ms=50)  # type: ignore[call-arg]
    async with Client(build_server(settings, durable=resolve(state_dir=tmp_path, environ={})), mode=mode) as client:
        started, run = texts(await client.call_tool("start_run", {"request": REQUEST}))
        assert started.startswith(f"Running (run {run['run_id']}, ")
        assert f'get_run (run_id "{run["run_id"]}"; wait_seconds waits for it)' in started
        done, record = texts(await client.call_tool("get_run", {"run_id": run["run_id"], "wait_seconds": 50}))
    assert record["status"] == "complete" and done.startswith(f"Complete (run {run['run_id']}, ")
    assert done.partition("\n\n")[2] == record["answer"]
