"""What a client may ask of the server (server/surface/limits.py, server/surface/strict.py), through an
in-process MCP client on both revisions, and `mcp-team serve`'s start-up checks. The issue-11 tests
(tests/server/test_client_mistakes.py) run the defaults through `mcp-team serve`; these cover the settings and the
messages."""

from __future__ import annotations

import json
import subprocess

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.handoffs import Budgets, RunSettings
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.server.surface import limits
from mcp_team.server.surface.limits import ServerLimits
from mcp_team.specialists.defaults import DEFAULT_TEAM
from mcp_team.teamfile.loading import TeamSpec
from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def offline() -> ModelSettings:
    return ModelSettings(model="offline")  # type: ignore[call-arg]


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_text_limits_apply_to_every_tool_and_name_the_setting(mode: str) -> None:
    limits = ServerLimits(max_request_chars=500, max_context_chars=1000)
    async with Client(build_server(offline(), limits=limits), mode=mode) as client:
        run = await client.call_tool("run_team", {"request": "r" * 501})
        plan = await client.call_tool("plan_team", {"request": "p" * 501})
        task = await client.call_tool("writer", {"task": "t" * 501})
        context = await client.call_tool("writer", {"task": "Write a haiku", "context": "c" * 1001})
        within = await client.call_tool("writer", {"task": "Write a haiku", "context": "c" * 1000})
        runs = (await client.read_resource("team://runs")).contents[0]
    for result, variable in [(run, "REQUEST"), (plan, "REQUEST"), (task, "REQUEST"), (context, "CONTEXT")]:
        assert result.is_error and f"MCP_TEAM_MAX_{variable}_CHARS" in text_of(result), text_of(result)
    assert "501 characters" in text_of(run) and "limit of 500" in text_of(run)
    assert not within.is_error
    assert isinstance(runs, types.TextResourceContents)
    ran = [r["request"] for r in json.loads(runs.text)["runs"]]
    assert ran == ["Write a haiku"]  # only the call within the limits ran (a specialist's call is a run too)


async def test_budget_overrides_are_capped_at_the_teams(mode: str) -> None:
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(budgets=Budgets(max_tokens=5000)))
    async with Client(build_server(offline(), team), mode=mode) as client:
        above = await client.call_tool("run_team", {"request": "Research bees", "max_tokens": 5001})
        inf = await client.call_tool("run_team", {"request": "Research bees", "deadline_seconds": "inf"})
        nan = await client.call_tool("run_team", {"request": "Research bees", "deadline_seconds": "nan"})
        equal = await client.call_tool("run_team", {"request": "Research bees", "max_tokens": 5000})
    assert above.is_error and "max_tokens=5001" in text_of(above) and "limit of 5000" in text_of(above)
    assert inf.is_error and nan.is_error and "deadline_seconds" in text_of(inf) + text_of(nan)
    assert not equal.is_error, text_of(equal)


async def test_prompt_argument_errors_name_the_prompt_and_its_arguments(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("writer", {"task": "Write", "tone": "dry"})
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("supervisor", {})
        ok = await client.get_prompt("writer", {"task": "Write a haiku"})
    assert unknown.value.code == types.INVALID_PARAMS
    assert "'tone'" in unknown.value.message and "task (required), context" in unknown.value.message
    assert missing.value.code == types.INVALID_PARAMS and "'request'" in missing.value.message
    assert ok.messages


def test_a_bad_limit_is_a_usage_error_at_start_up() -> None:
    for variable, value in [("MCP_TEAM_MAX_RUNS", "0"), ("MCP_TEAM_MAX_REQUEST_CHARS", "lots")]:
        proc = subprocess.run(
            [MCP_TEAM, "serve"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG_GUARD,
            env=clean_env(MCP_TEAM_MODEL="offline", **{variable: value}),
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert variable in proc.stderr and "Traceback" not in proc.stderr  # named as it was set, not by its field


async def test_memory_is_given_back_once_the_last_run_in_progress_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    # Giving memory back collects garbage first (a pause of the event loop): once per burst, after its last
    # run, never while runs are in progress.
    monkeypatch.setattr(limits, "RELEASE_AFTER", 0.0)
    slots = limits.RunSlots()
    gates = [anyio.Event() for _ in range(3)]

    async def work(gate: anyio.Event) -> None:
        await gate.wait()

    guarded = slots.guarded(work, 3)
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            for gate in gates:
                tg.start_soon(guarded, gate)
            await anyio.wait_all_tasks_blocked()
            assert slots.running == 3
            gates[0].set()
            gates[1].set()
            await anyio.wait_all_tasks_blocked()
            await anyio.sleep(0.01)  # past a release that would have been scheduled
            assert (slots.running, slots.releases) == (1, 0)
            gates[2].set()
        await anyio.sleep(0.01)
    assert (slots.running, slots.releases) == (0, 1)
