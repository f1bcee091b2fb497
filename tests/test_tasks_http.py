"""MCP Tasks against `mcp-team serve --http` in a subprocess: a task outlives the connection that started
it (both revisions), and the TypeScript SDK's task client (1.32, pinned with the conformance suite in
tests/conformance; it speaks 2025-11-25) drives a whole task life."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from support import HANG_GUARD, clean_env, serve_http
from task_client import TaskClient, Tasks
from test_conformance import NODE, ROOT, SUITE, _install_suite

pytestmark = [pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TS_CLIENT = Path(__file__).parent / "fixtures" / "ts_tasks_client.cjs"


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


def _ts_client(url: str) -> dict[str, Any]:
    _install_suite()  # the suite's node_modules hold the TypeScript SDK, pinned by tests/conformance's lock
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
