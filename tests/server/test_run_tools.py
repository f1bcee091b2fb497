"""Runs that outlive a call, through the in-process `mcp.Client` on both protocol revisions: `start_run`
returns at once, `get_run` follows the run (and waits, bounded), `cancel_run` stops it; `team://runs` reads
the run store; a run in a `thread` sees the thread's earlier requests and answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server
from support import HANG_GUARD

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REQUEST = "Research bees, calculate 2+2, write a short report and review it"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def durable_server(state: Path, latency_ms: float = 0.0) -> Any:
    settings = ModelSettings(model="offline", offline_latency_ms=latency_ms)  # type: ignore[call-arg]
    return build_server(settings, durable=resolve(state_dir=state, environ={}))


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_start_run_returns_at_once_and_get_run_follows_it_to_the_answer(tmp_path: Path, mode: str) -> None:
    async with Client(durable_server(tmp_path, latency_ms=50), mode=mode) as client:
        started = await call(client, "start_run", request=REQUEST)
        assert started["status"] == "running"
        run_id = started["run_id"]
        done = await call(client, "get_run", run_id=run_id, wait_seconds=50)
        assert done["status"] == "complete", done
        assert "offline backend" in done["answer"]
        assert {h["target"] for h in done["handoffs"]} == {"researcher", "analyst", "writer", "reviewer"}
        listed = json.loads((await client.read_resource("team://runs")).contents[0].text)  # type: ignore[union-attr]
        assert [r["run_id"] for r in listed["runs"]] == [run_id] and listed["runs"][0]["status"] == "complete"
        one = json.loads((await client.read_resource(f"team://runs/{run_id}")).contents[0].text)  # type: ignore[union-attr]
        assert one["status"] == "complete" and one["answer"] == done["answer"]


async def test_cancel_run_stops_a_running_run(tmp_path: Path, mode: str) -> None:
    async with Client(durable_server(tmp_path, latency_ms=400), mode=mode) as client:
        run_id = (await call(client, "start_run", request=REQUEST))["run_id"]
        while not (await call(client, "get_run", run_id=run_id))["handoffs"]:  # noqa: ASYNC110 - polled as a client does
            await anyio.sleep(0.02)
        cancelled = await call(client, "cancel_run", run_id=run_id)
        assert cancelled["status"] == "cancelled", cancelled
        assert (await call(client, "get_run", run_id=run_id))["status"] == "cancelled"
        again = await call(client, "cancel_run", run_id=run_id)  # a finished run is left as it is
        assert again["status"] == "cancelled"


async def test_a_running_run_shows_what_it_has_spent_so_far_and_keeps_it_when_cancelled(
    tmp_path: Path, mode: str
) -> None:
    async with Client(durable_server(tmp_path, latency_ms=300), mode=mode) as client:
        run_id = (await call(client, "start_run", request=REQUEST))["run_id"]
        with anyio.fail_after(HANG_GUARD):
            while True:  # until a handoff has finished while the run still runs
                running = await call(client, "get_run", run_id=run_id)
                assert running["status"] == "running", running
                if any(h["status"] == "completed" for h in running["handoffs"]):
                    break
                await anyio.sleep(0.02)
        spent = running["usage"]
        # the supervisor's plan and the finished handoff's call at least: not the empty report of before
        assert spent["model_calls"] >= 2 and spent["total"]["input_tokens"] > 0, spent
        done = next(h for h in running["handoffs"] if h["status"] == "completed")
        assert spent["by_specialist"][done["target"]]["output_tokens"] > 0, spent
        cancelled = await call(client, "cancel_run", run_id=run_id)
        assert cancelled["status"] == "cancelled", cancelled
        assert cancelled["usage"]["model_calls"] >= spent["model_calls"], cancelled["usage"]
        assert cancelled["usage"]["total"]["input_tokens"] >= spent["total"]["input_tokens"]


async def test_a_run_in_a_thread_sees_the_earlier_turns(tmp_path: Path, mode: str) -> None:
    async with Client(durable_server(tmp_path), mode=mode) as client:
        first = await client.call_tool("run_team", {"request": "Write a haiku about bees", "thread": "t1"})
        assert not first.is_error, first.content
        second = await call(client, "start_run", request="Now shorten it", thread="t1")
        done = await call(client, "get_run", run_id=second["run_id"], wait_seconds=50)
        assert done["status"] == "complete" and done["thread"] == "t1"
        # The offline supervisor answers "to" the request it was given: the thread so far, then the new one.
        assert "Earlier in this thread" in done["answer"] and "Write a haiku about bees" in done["answer"]
        other = await call(client, "start_run", request="Now shorten it", thread="t2")
        alone = await call(client, "get_run", run_id=other["run_id"], wait_seconds=50)
        assert "Earlier in this thread" not in alone["answer"]


async def test_bad_run_arguments_are_exact_errors(tmp_path: Path, mode: str) -> None:
    async with Client(durable_server(tmp_path), mode=mode) as client:
        missing = await client.call_tool("get_run", {"run_id": "nope"})
        assert missing.is_error and "no run 'nope'" in missing.content[0].text  # type: ignore[union-attr]
        too_long = await client.call_tool("get_run", {"run_id": "x", "wait_seconds": 3600})
        assert too_long.is_error and "wait_seconds" in too_long.content[0].text  # type: ignore[union-attr]
        bad_thread = await client.call_tool("start_run", {"request": "hi", "thread": "no spaces allowed"})
        assert bad_thread.is_error and "thread" in bad_thread.content[0].text  # type: ignore[union-attr]


async def test_an_ephemeral_server_runs_start_run_and_threads_in_memory(mode: str) -> None:
    # One run service on every server: an --ephemeral one keeps its runs in memory, so start_run, get_run and a
    # thread's follow-up work there too (for the life of the process); its instructions do not promise restarts.
    server = build_server(ModelSettings(model="offline"))  # type: ignore[call-arg]
    async with Client(server, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"start_run", "get_run", "cancel_run", "answer_checkpoint"} <= names
        assert "survive a restart" not in (client.instructions or "")
        first = await client.call_tool("run_team", {"request": "Write a haiku about bees", "thread": "t1"})
        assert not first.is_error, first.content
        started = await client.call_tool("start_run", {"request": "Now one about ants", "thread": "t1"})
        run_id = started.structured_content["run_id"]  # type: ignore[index]
        done = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 50})
    record = done.structured_content
    assert record is not None and record["status"] == "complete" and not record["resumable"], record
    assert record["thread"] == "t1"


async def test_subscribing_to_a_run_tells_of_its_changes_until_it_finishes(tmp_path: Path, mode: str) -> None:
    updates: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    server = durable_server(tmp_path, latency_ms=50)
    async with Client(server, mode=mode, message_handler=on_message, cache=None) as client:
        run_id = (await call(client, "start_run", request=REQUEST))["run_id"]
        uri = f"team://runs/{run_id}"
        if mode == "legacy":
            caps = client.server_capabilities
            assert caps is not None and caps.resources is not None and caps.resources.subscribe
            await client.subscribe_resource(uri)
            done = await call(client, "get_run", run_id=run_id, wait_seconds=50)
            with anyio.fail_after(HANG_GUARD):
                while len(updates) < 2:  # noqa: ASYNC110 - notifications arrive on their own
                    await anyio.sleep(0.01)
        else:
            async with client.listen(resource_subscriptions=[uri]) as subscription:
                with anyio.fail_after(HANG_GUARD):
                    async for event in subscription:
                        updates.append(getattr(event, "uri", ""))
                        record = await call(client, "get_run", run_id=run_id)
                        if record["status"] != "running":
                            break
            done = await call(client, "get_run", run_id=run_id)
        assert done["status"] == "complete"
        assert set(updates) == {uri} and len(updates) >= 2, updates
        if mode == "legacy":  # a run that does not exist cannot be watched (it would be polled for ever)
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource("team://runs/no-such-run")
            assert refused.value.error.code == types.INVALID_PARAMS and "no-such-run" in refused.value.error.message
            for other in ("team://nothing",):  # accepted before, and never told of
                with pytest.raises(MCPError) as never:
                    await client.subscribe_resource(other)
                assert never.value.error.code == types.INVALID_PARAMS
                assert f"'{other}' cannot be subscribed to: only a run's record" in never.value.error.message


async def test_no_specialist_may_take_a_name_of_the_servers_own_tools_or_prompts(tmp_path: Path, mode: str) -> None:
    from mcp_team.specialists import DEFAULT_TEAM
    from mcp_team.teamfile.loading import RESERVED_NAMES

    async with Client(durable_server(tmp_path), mode=mode) as client:
        listed = (await client.list_tools()).tools
        for tool in (
            "start_run",
            "get_run",
            "cancel_run",
            "answer_checkpoint",
        ):  # the instructions say what each is for
            assert f"{tool}" in (client.instructions or ""), client.instructions
        prompts = {p.name for p in (await client.list_prompts()).prompts}
    tools = {t.name for t in listed}
    own = (tools | prompts) - {s.name for s in DEFAULT_TEAM}
    for tool in listed:  # descriptions as written, without the indentation of the docstrings they come from
        assert tool.description and "\n " not in tool.description, (tool.name, tool.description)
    assert {"run_team", "start_run", "get_run", "cancel_run", "supervisor"} <= own <= set(RESERVED_NAMES)
