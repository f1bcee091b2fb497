"""MCP Tasks over streamable HTTP: against `mcp-team serve --http` in a subprocess, a task outlives the
connection that started it (both revisions) and the TypeScript SDK's task client (1.32, pinned with the
conformance suite in tests/conformance; it speaks 2025-11-25) drives a whole task life; against a server
with two users' tokens, each user sees only their own tasks."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_team.server.surface import resources
from support import HANG_GUARD, clean_env, plain_http_async, serve_http
from support.conformance import NODE, ROOT, SUITE, install_suite
from support.task_client import TaskClient, Tasks
from support.two_users import two_user_server

pytestmark = [
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.conformance,
]

TS_CLIENT = Path(__file__).parents[1] / "fixtures" / "ts_tasks_client.cjs"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    # Model calls take 100 ms, so a run is still going when the client that started it has gone.
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="100")) as base:
        yield f"{base}/mcp"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_task_outlives_the_connection_that_started_it(server: str, mode: str) -> None:
    async with Client(server, mode=mode, extensions=[Tasks()]) as first:
        created = await TaskClient(first, mode).create({"request": "Research bees and calculate 2+2"})
    assert created["status"] == "working"

    async with Client(server, mode=mode, extensions=[Tasks()]) as second:  # a new connection
        tasks = TaskClient(second, mode)
        task, result = await tasks.final(created["taskId"])
        record = await tasks.record(created["taskId"])

    assert task["status"] == "completed"
    assert result["structuredContent"]["run_id"] == created["taskId"]
    assert record["status"] == "complete" and len(record["handoffs"]) == 2
    assert all(h["status"] == "completed" for h in record["handoffs"])


def _tasks_get(url: str, task_id: str, mcp_name: str) -> dict[str, Any]:
    """A 2026-07-28 `tasks/get` as it goes over HTTP, with its routing headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": mcp_name}
    headers |= {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    answer = httpx2.post(url, json=body, headers=headers, timeout=HANG_GUARD)
    text = answer.text
    # The answer comes as JSON or as one SSE event.
    data = json.loads(text.split("data:", 1)[1].split("\n\n", 1)[0] if "data:" in text else text)
    return dict(data)


@pytest.mark.anyio
async def test_the_task_routing_header_must_name_the_task(server: str) -> None:
    async with Client(server, mode="auto", extensions=[Tasks()]) as client:
        task_id = (await TaskClient(client, "auto").create({"request": "Research bees"}))["taskId"]
    matching = _tasks_get(server, task_id, task_id)
    mismatched = _tasks_get(server, task_id, "another-task")
    assert matching["result"]["taskId"] == task_id
    assert mismatched["error"]["code"] == -32020 and "Mcp-Name" in mismatched["error"]["message"]


PRESET = ROOT / "src" / "mcp_team" / "teamfile" / "presets" / "curriculum.toml"


MODES = ("auto", "legacy")  # 2026-07-28, 2025-11-25


async def _start(base: str, mode: str) -> str:
    async with Client(f"{base}/mcp", mode=mode, extensions=[Tasks()]) as client:
        created = await TaskClient(client, mode).create({"request": "Research bees and calculate 2+2"})
    return str(created["taskId"])


async def _end(base: str, mode: str, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task once it has ended, and its result (or, for one that failed, the error), from a new client."""
    async with Client(f"{base}/mcp", mode=mode, extensions=[Tasks()]) as client:
        tasks = TaskClient(client, mode)
        if not tasks.legacy:
            task, result = await tasks.final(task_id)
            return task, task.get("error", result)
        try:
            return await tasks.final(task_id)
        except MCPError as exc:
            return await tasks.get(task_id), exc.error.model_dump()


@pytest.mark.anyio
async def test_a_task_outlives_the_server_process_or_fails_with_the_reason(tmp_path: Path) -> None:
    """Each server below is stopped (SIGTERM) with the runs it started unfinished (a run makes several model
    calls of 1 s each, and the server stops at once). A restart with the same team resumes them; a restart
    with another team (a preset) does not replay a run started with the built-in team: it is interrupted,
    and its task fails saying why. Both revisions, one client each."""
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="1000", MCP_TEAM_STATE_DIR=str(tmp_path))
    with serve_http(env=env) as base:
        stranded = {mode: await _start(base, mode) for mode in MODES}
    with serve_http("--team", str(PRESET), env=env) as base:
        failed = {mode: await _end(base, mode, stranded[mode]) for mode in MODES}
        resumed = {mode: await _start(base, mode) for mode in MODES}
    with serve_http("--team", str(PRESET), env=env) as base:
        completed = {mode: await _end(base, mode, resumed[mode]) for mode in MODES}

    for mode in MODES:
        task, result = completed[mode]
        assert task["status"] == "completed", mode
        assert (
            result["structuredContent"]["status"] == "complete"
            and result["structuredContent"]["run_id"] == task["taskId"]
        )
        task, error = failed[mode]
        assert task["status"] == "failed" and "team changed" in task["statusMessage"], mode
        # 2025-11-25: tasks/result answers the JSON-RPC error; 2026-07-28: tasks/get inlines it.
        assert error["code"] == types.INTERNAL_ERROR and "team changed" in error["message"], mode
        assert f"team://runs/{stranded[mode]}" in error["message"]


def _ts_client(url: str) -> dict[str, Any]:
    install_suite()  # the suite's node_modules hold the TypeScript SDK, pinned by tests/conformance's lock
    proc = subprocess.run(
        [str(NODE), str(TS_CLIENT), str(SUITE), url], capture_output=True, text=True, timeout=HANG_GUARD, cwd=ROOT
    )
    steps = {}
    for line in proc.stdout.splitlines():
        step = json.loads(line)
        steps[step["step"]] = step["value"]
    assert proc.returncode == 0 and "crashed" not in steps, proc.stdout + proc.stderr
    return steps


def test_the_typescript_sdk_task_client(server: str) -> None:
    steps = _ts_client(server)

    assert steps["capability"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert steps["execution"] == {"taskSupport": "optional"}
    stream = steps["stream"]
    assert stream[0]["type"] == "taskCreated" and stream[-1]["type"] == "result"
    task_id = stream[0]["task"]["taskId"]
    result = stream[-1]["result"]
    assert result["structuredContent"]["run_id"] == task_id and result["structuredContent"]["status"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert steps["created"]["status"] == "working" and steps["get"]["status"] == "working"
    assert steps["cancel"]["status"] == "cancelled" and steps["get after cancel"]["status"] == "cancelled"
    listed = dict(steps["list"])
    assert listed[task_id] == "completed" and listed[steps["created"]["taskId"]] == "cancelled"
    assert steps["unknown"]["code"] == -32602 and "no-such-task" in steps["unknown"]["message"]


@asynccontextmanager
async def connect(url: str, token: str, mode: str) -> AsyncIterator[TaskClient]:
    async with (
        plain_http_async(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, extensions=[Tasks()]) as client,
    ):
        yield TaskClient(client, mode)


async def _code(call: Any) -> int:
    with pytest.raises(MCPError) as caught:
        await call
    return caught.value.error.code


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_task_belongs_to_the_user_who_started_it(mode: str, tmp_path: Path) -> None:
    async with two_user_server(tmp_path) as url:
        async with connect(url, "alice", mode) as alice:
            task_id = (await alice.create({"request": "Research bees"}))["taskId"]
            await alice.final(task_id)
            mine = [t["taskId"] for t in (await alice.list())["tasks"]] if alice.legacy else [task_id]
        async with connect(url, "bob", mode) as bob:
            refused = [await _code(bob.get(task_id)), await _code(bob.cancel(task_id))]
            if bob.legacy:
                refused.append(await _code(bob.result(task_id)))
                bobs = (await bob.list())["tasks"]
            else:
                bobs = []

    assert mine == [task_id]
    assert refused == [types.INVALID_PARAMS] * len(refused)  # "not found": never whose it is
    assert bobs == []


@pytest.mark.anyio
async def test_a_run_started_with_start_run_belongs_to_its_user_too(tmp_path: Path) -> None:
    async with two_user_server(tmp_path) as url:
        async with connect(url, "alice", "legacy") as alice:
            started = await alice.client.call_tool("start_run", {"request": "Research bees"})
            run_id = started.structured_content["run_id"]
            mine = await alice.client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 30})
        async with connect(url, "bob", "legacy") as bob:
            seen = await bob.client.call_tool("get_run", {"run_id": run_id})
            cancelled = await bob.client.call_tool("cancel_run", {"run_id": run_id})
            answered = await bob.client.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve"})

    assert not mine.is_error and mine.structured_content["status"] == "complete"
    for refused in (seen, cancelled, answered):  # "no run": never whose it is
        assert refused.is_error and f"no run '{run_id}'" in refused.content[0].text


def _runs_listed(contents: Any) -> set[str]:
    return {r["run_id"] for r in json.loads(contents[0].text)["runs"]}


@pytest.mark.anyio
@pytest.mark.parametrize("durable", [True, False], ids=["durable", "ephemeral"])
async def test_runs_and_their_records_are_shown_to_their_user_only(durable: bool, tmp_path: Path) -> None:
    """team://runs and the run pages (/runs.json) list the caller's own runs (run_team's and start_run's), and
    another user's run and its record do not exist for them, whichever way the run was started. The pages of a
    server that checks tokens of its own verifier are refused unless http_app is given it too."""
    async with two_user_server(tmp_path if durable else None) as url:
        async with connect(url, "alice", "legacy") as alice:
            ran = await alice.client.call_tool("run_team", {"request": "Research bees"})
            alices = {ran.structured_content["run_id"]}  # type: ignore[index]
            if durable:
                started = await alice.client.call_tool("start_run", {"request": "Research bees"})
                alices.add(started.structured_content["run_id"])  # type: ignore[index]
            alice_sees = _runs_listed((await alice.client.read_resource("team://runs")).contents)
        async with connect(url, "bob", "legacy") as bob:
            his = await bob.client.call_tool("run_team", {"request": "Write a haiku"})
            bobs = {his.structured_content["run_id"]}  # type: ignore[index]
            bob_sees = _runs_listed((await bob.client.read_resource("team://runs")).contents)
            async with plain_http_async(  # the pages too: /runs.json and /runs/{id}.json with Bob's token
                base_url=url.removesuffix("/mcp"), headers={"Authorization": "Bearer bob"}, timeout=HANG_GUARD
            ) as web:
                bob_sees_on_the_page = {r["run_id"] for r in (await web.get("/runs.json")).json()["runs"]}
                alices_pages = [(await web.get(f"/runs/{run_id}.json")).status_code for run_id in alices]
            for run_id in alices:
                with pytest.raises(MCPError) as read:
                    await bob.client.read_resource(f"team://runs/{run_id}")
                assert f"no run '{run_id}'" in read.value.error.message
                if durable:
                    seen = await bob.client.call_tool("get_run", {"run_id": run_id})
                    assert seen.is_error and f"no run '{run_id}'" in seen.content[0].text  # type: ignore[union-attr]
                    with pytest.raises(MCPError) as watched:
                        await bob.client.subscribe_resource(f"team://runs/{run_id}")
                    assert f"no run '{run_id}'" in watched.value.error.message

    assert alices <= alice_sees and not bobs & alice_sees
    assert bob_sees == bob_sees_on_the_page == bobs
    assert alices_pages == [404] * len(alices)


@pytest.mark.anyio
async def test_a_users_runs_are_listed_past_newer_runs_of_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """team://runs reads the store a page at a time until it has a page of the caller's own: Alice's run, older
    than a page of Bob's, is still listed to her (pages of two here)."""
    monkeypatch.setattr(resources, "LISTED", 2)
    async with two_user_server(tmp_path) as url:
        async with connect(url, "alice", "legacy") as alice:
            hers = (await alice.client.call_tool("run_team", {"request": "Research bees"})).structured_content
        async with connect(url, "bob", "legacy") as bob:
            for _ in range(3):
                await bob.client.call_tool("run_team", {"request": "Write a haiku"})
        async with connect(url, "alice", "legacy") as alice:
            listed = _runs_listed((await alice.client.read_resource("team://runs")).contents)
    assert listed == {hers["run_id"]}  # type: ignore[index]
