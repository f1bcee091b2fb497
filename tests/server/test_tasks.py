"""MCP Tasks for `run_team` through the in-process `mcp.Client`, on both protocol revisions: 2025-11-25
(the core `tasks` capability) and 2026-07-28 (the `io.modelcontextprotocol/tasks` extension)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import DurableConfig, resolve
from mcp_team.server.app import build_server
from mcp_team.server.surface.limits import ServerLimits
from support.task_client import ANY, EXTENSION, RELATED, TaskClient, Tasks, get_request

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def offline(**kw: Any) -> ModelSettings:
    return ModelSettings(model="offline", **kw)


@pytest.fixture(params=["durable", "ephemeral"])
def runs(request: pytest.FixtureRequest, tmp_path: Path) -> DurableConfig | None:
    """Where tasks' runs live: the durable run service (SQLite in a temporary state directory), or the
    memory of an `--ephemeral` server."""
    return resolve(state_dir=tmp_path) if request.param == "durable" else None


async def test_run_team_as_a_task_is_the_run(mode: str, runs: DurableConfig | None) -> None:
    tasks_ext = Tasks()
    async with Client(build_server(offline(), durable=runs), mode=mode, extensions=[tasks_ext]) as client:
        tasks = TaskClient(client, mode)
        created = await tasks.create({"request": "Research bees and calculate 2+2"})
        assert created["status"] == "working" and created["createdAt"] and created["lastUpdatedAt"]
        assert "result" not in created and "error" not in created
        now = await tasks.get(created["taskId"])  # strong consistency: the task exists once created
        assert now["taskId"] == created["taskId"]
        task, result = await tasks.final(created["taskId"])
        record = await tasks.record(created["taskId"])  # the task id is the run id
        listed = await tasks.list() if tasks.legacy else None
        if tasks.legacy:
            with anyio.fail_after(60):  # a hang guard, not a speed claim
                await tasks_ext.heard.wait()

    assert task["status"] == "completed" and task["taskId"] == created["taskId"]
    run = result["structuredContent"]
    assert run["run_id"] == created["taskId"] and run["status"] == "complete" and not result.get("isError")
    answer, data = result["content"]  # exactly a plain call's result: the answer first, then the record as JSON
    assert run["answer"] in answer["text"] and json.loads(data["text"]) == run
    assert record["status"] == "complete" and record["answer"] == run["answer"]
    if tasks.legacy:
        assert result["_meta"][RELATED] == {"taskId": created["taskId"]}
        assert task["ttl"] is None and task["pollInterval"] > 0
        assert [t["taskId"] for t in listed["tasks"]] == [created["taskId"]]  # type: ignore[index]
        (status,) = tasks_ext.statuses
        assert status.task_id == created["taskId"] and status.status == "completed"
    else:
        assert "_meta" not in result  # 2026-07-28: the task id is at the root already
        assert task["ttlMs"] is None and task["pollIntervalMs"] > 0 and "ttl" not in task


async def test_what_each_revision_declares_and_plain_calls_stay_plain(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        caps = client.server_capabilities
        plain = await client.call_tool("run_team", {"request": "Research bees"})  # no task asked for
    if mode == "legacy":
        assert caps.tasks is not None and caps.tasks.requests.tools.call is not None  # type: ignore[union-attr]
        assert caps.tasks.list is not None and caps.tasks.cancel is not None
        assert tools["run_team"].execution.task_support == "optional"  # type: ignore[union-attr]
        assert all(t.execution is None for name, t in tools.items() if name != "run_team")
    else:
        assert EXTENSION in (caps.extensions or {})
    assert plain.structured_content["status"] == "complete"  # type: ignore[index]


async def test_a_server_without_a_model_of_its_own_declares_no_tasks(mode: str) -> None:
    # Runs on the client's model (sampling) need the calling request, so they are never tasks.
    async with Client(build_server(ModelSettings()), mode=mode, extensions=[Tasks()]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        caps = client.server_capabilities
        unknown = await _error(client.session.send_request(get_request("any"), ANY))
    assert caps.tasks is None and tools["run_team"].execution is None
    assert EXTENSION not in (caps.extensions or {})
    assert unknown.code == types.METHOD_NOT_FOUND


LONG_CALL = 3.0  # seconds


@pytest.mark.slow
async def test_cancelling_a_task_stops_its_in_flight_model_calls(mode: str, runs: DurableConfig | None) -> None:
    # Model calls long enough that both are still in flight when the cancel comes on a loaded machine (with
    # 300 ms, one finished first now and then while the test read the record and sent the cancel).
    server = build_server(offline(offline_latency_ms=int(LONG_CALL * 1000)), durable=runs)
    async with Client(server, mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        created = await tasks.create({"request": "Research bees and calculate 2+2"})
        run_id = created["taskId"]
        # Both handoffs started: both specialists are inside their model calls.
        while len((await tasks.record(run_id))["handoffs"]) < 2:  # noqa: ASYNC110
            await anyio.sleep(0.01)
        acked = await tasks.cancel(run_id)
        # 2025-11-25: the task is cancelled when the answer comes; 2026-07-28 acks, and tasks/get says so.
        after = await tasks.get(run_id)
        record = await tasks.record(run_id)
        await anyio.sleep(LONG_CALL + 0.2)  # had anything kept running, it would have finished by now
        later = await tasks.record(run_id)

    if mode == "legacy":
        assert acked["status"] == "cancelled" and acked["taskId"] == run_id
    else:
        assert "taskId" not in acked and "status" not in acked
    assert after["status"] == "cancelled"
    # Cancelled inside their model calls: recorded as cancelled, not finished later.
    assert record["status"] == "cancelled"
    assert sorted((h["target"], h["status"]) for h in record["handoffs"]) == [
        ("analyst", "cancelled"),
        ("researcher", "cancelled"),
    ]
    assert later == record


async def test_a_failed_run_is_the_failure_each_revision_names(mode: str, runs: DurableConfig | None) -> None:
    server = build_server(offline(faults="server_error:researcher"), durable=runs)
    async with Client(server, mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        created = await tasks.create({"request": "Research bees"})
        task, result = await tasks.final(created["taskId"])
    # 2025-11-25: "when the tool result has isError, the task should reach failed"; 2026-07-28: a tool
    # error is a completed task whose result has isError (failed is for protocol errors).
    assert task["status"] == ("failed" if mode == "legacy" else "completed")
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "could not answer" in text and f"team://runs/{created['taskId']}" in text and "server_error" in text


async def _error(call: Any) -> types.ErrorData:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.error


async def test_bad_input_gets_exact_json_rpc_errors(mode: str, runs: DurableConfig | None) -> None:
    async with Client(build_server(offline(), durable=runs), mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        done = (await tasks.create({"request": "Research bees"}))["taskId"]
        await tasks.final(done)
        unknown = [await _error(tasks.get("no-such-task")), await _error(tasks.cancel("no-such-task"))]
        if mode == "legacy":
            bad_arguments = await _error(tasks.create({"request": "x", "mode": "sideways"}))
            unknown_argument = await _error(tasks.create({"request": "x", "colour": "red"}))
            over_budget = await _error(tasks.create({"request": "x", "max_handoffs": 10_000}))
            unknown.append(await _error(tasks.result("no-such-task")))
            cancel_finished = await _error(tasks.cancel(done))
            not_a_task_tool = await _error(tasks.create({"request": "x"}, name="plan_team"))
            bad_cursor = await _error(tasks.list("not-a-cursor"))
            raw = client.session._dispatcher.send_raw_request
            call = {"name": "run_team", "arguments": {"request": "x"}}
            bad_task = [
                await _error(raw("tools/call", {**call, "task": t}, {})) for t in ("yes", {"ttl": -5}, {"ttl": True})
            ]
        else:
            # 2026-07-28: the server decides; arguments a plain call refuses make no task but that call's error.
            refused = [
                await client.call_tool("run_team", arguments)
                for arguments in ({"request": "x", "mode": "sideways"}, {"request": "x", "colour": "red"},
                                  {"request": "x", "max_handoffs": 10_000})
            ]  # fmt: skip
            cancel_again = await tasks.cancel(done)
            removed = [await _error(tasks.result(done)), await _error(tasks.list())]

    for error in unknown:
        assert error.code == types.INVALID_PARAMS and "no-such-task" in error.message and "not found" in error.message
    if mode == "legacy":
        assert bad_arguments.code == types.INVALID_PARAMS and "mode" in bad_arguments.message
        assert unknown_argument.code == types.INVALID_PARAMS and "colour" in unknown_argument.message
        assert over_budget.code == types.INVALID_PARAMS and "max_handoffs=10000 is above" in over_budget.message
        assert cancel_finished.code == types.INVALID_PARAMS and "'completed'" in cancel_finished.message
        assert not_a_task_tool.code == types.METHOD_NOT_FOUND and "plan_team" in not_a_task_tool.message
        assert bad_cursor.code == types.INVALID_PARAMS and "cursor" in bad_cursor.message
        for error in bad_task:  # each created a task before
            assert error.code == types.INVALID_PARAMS and "`task` must be an object" in error.message, error
    else:
        texts = [r.content[0].text for r in refused if r.is_error and isinstance(r.content[0], types.TextContent)]
        assert len(texts) == 3 and "mode" in texts[0] and "colour" in texts[1] and "is above" in texts[2]
        assert "taskId" not in cancel_again  # cancelling an ended task is an idempotent ack
        assert all(e.code == types.METHOD_NOT_FOUND for e in removed)  # no tasks/result, tasks/list in 2026


async def test_a_2026_client_that_does_not_declare_tasks_gets_plain_calls_and_32021() -> None:
    async with Client(build_server(offline()), mode="auto") as client:
        plain = await client.call_tool("run_team", {"request": "Research bees"})
        gated = await _error(client.session.send_request(get_request("any"), ANY))
    assert plain.structured_content["status"] == "complete"  # type: ignore[index]
    assert gated.code == -32021 and EXTENSION in json.dumps(gated.data)


async def test_tasks_list_pages_newest_first(runs: DurableConfig | None) -> None:
    async with Client(build_server(offline(), durable=runs), mode="legacy") as client:
        tasks = TaskClient(client, "legacy")
        ids = [(await tasks.create({"request": f"Research bees {i}"}))["taskId"] for i in range(3)]
        for task_id in ids:
            await tasks.final(task_id)
        page = await tasks.list()
    assert [t["taskId"] for t in page["tasks"]] == ids[::-1] and "nextCursor" not in page


async def test_an_auto_polling_2026_client_gets_the_plain_result() -> None:
    async with Client(build_server(offline()), mode="auto", extensions=[Tasks()]) as client:
        result = await client.call_tool("run_team", {"request": "Research bees"})  # the claim polls tasks/get
    assert result.structured_content["status"] == "complete"  # type: ignore[index]


async def test_task_runs_count_against_the_server_run_limit(runs: DurableConfig | None) -> None:
    server = build_server(offline(offline_latency_ms=2000), limits=ServerLimits(max_runs=1), durable=runs)
    async with Client(server, mode="legacy") as client:
        tasks = TaskClient(client, "legacy")
        first = (await tasks.create({"request": "Research bees"}))["taskId"]
        busy = await _error(tasks.create({"request": "Research wasps"}))
        await tasks.cancel(first)
        after = await tasks.create({"request": "Research ants"})  # the slot came back with the cancel
        await tasks.cancel(after["taskId"])
    assert busy.code == types.INVALID_PARAMS and "MCP_TEAM_MAX_RUNS=1" in busy.message


async def test_the_run_tools_see_and_cancel_the_task(mode: str, tmp_path: Path) -> None:
    server = build_server(offline(offline_latency_ms=2000), durable=resolve(state_dir=tmp_path))
    async with Client(server, mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        task_id = (await tasks.create({"request": "Research bees"}))["taskId"]
        seen = await client.call_tool("get_run", {"run_id": task_id})
        cancelled = await client.call_tool("cancel_run", {"run_id": task_id})
        task = await tasks.get(task_id)
    assert seen.structured_content["run_id"] == task_id and seen.structured_content["status"] == "running"  # type: ignore[index]
    assert cancelled.structured_content["status"] == "cancelled"  # type: ignore[index]
    assert task["status"] == "cancelled"
