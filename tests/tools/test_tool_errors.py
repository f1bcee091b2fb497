"""Every error a tool of ours reports reads one way, through an MCP client on both revisions: "Error executing
tool NAME: what is wrong", the SDK's words for a `ToolError`. Before, the argument errors we build ourselves
(unknown, invalid) said "unknown argument(s) for run_team: ..." without it, and a 2025-11-25 `run_team` task
refused before it started said other words than the plain call (`invalid arguments for run_team`, no quotes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server
from support.task_client import TaskClient, Tasks

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

PATTERN = "'^[A-Za-z0-9_.~-]+$'"
ACCEPTS = (
    "'request', 'mode', 'max_handoffs', 'max_model_calls', 'max_tokens', 'deadline_seconds', 'thread', 'max_cost', "
    "'checkpoints'"
)
# (tool, arguments, what it says after "Error executing tool NAME: "), each made a different way.
ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("run_team", {"request": "x", "colour": "red"}, f"unknown argument(s) 'colour'; it accepts: {ACCEPTS}"),
    (
        "run_team",
        {"request": "x", "mode": "sideways"},
        "invalid argument(s): mode: Input should be 'adaptive' or 'planned'",
    ),
    ("start_run", {}, "invalid argument(s): request: Field required"),
    ("get_run", {"run_id": "bad id!"}, f"invalid argument(s): run_id: String should match pattern {PATTERN}"),
    ("get_run", {"run_id": "nope"}, "no run 'nope' on this server (see team://runs)"),
    ("cancel_run", {"run_id": "nope"}, "no run 'nope' on this server (see team://runs)"),
    ("answer_checkpoint", {"run_id": "nope", "decision": "approve"}, "no run 'nope' on this server (see team://runs)"),
    ("researcher", {"task": " "}, "'task' is empty: say what the specialist should do"),
    ("plan_team", {"request": " "}, "'request' is empty: say what the team should do"),
]


def text_of(result: types.CallToolResult) -> str:
    assert result.is_error and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.slow
async def test_every_tool_error_reads_the_sdks_way(mode: str, tmp_path: Path) -> None:
    server = build_server(
        ModelSettings(model="offline", faults="server_error:supervisor"), durable=resolve(state_dir=tmp_path)
    )
    async with Client(server, mode=mode, extensions=[Tasks()]) as client:
        said = [text_of(await client.call_tool(name, arguments)) for name, arguments, _ in ERRORS]
        failed_run = text_of(await client.call_tool("run_team", {"request": "Research bees"}))
        tasks = TaskClient(client, mode)
        _, failed_task = await tasks.final((await tasks.create({"request": "Research bees"}))["taskId"])
        refused_tasks: list[str] = []
        for arguments in ({"request": "x", "colour": "red"}, {"request": "x", "mode": "sideways"}):
            if tasks.legacy:  # 2025-11-25: a task-augmented call refused before it starts is a protocol error
                with pytest.raises(MCPError) as refused:
                    await tasks.create(arguments)
                assert refused.value.code == types.INVALID_PARAMS
                refused_tasks.append(refused.value.message)
            else:  # 2026-07-28: the server decides, and answers as the plain call
                refused_tasks.append(text_of(await client.call_tool("run_team", arguments)))

    assert said == [f"Error executing tool {name}: {says}" for name, _, says in ERRORS]
    assert failed_run.startswith("Error executing tool run_team: the team could not answer (run "), failed_run
    assert failed_task["isError"] is True
    assert failed_task["content"][0]["text"].startswith("Error executing tool run_team: the team could not answer")
    assert refused_tasks == said[:2]  # the same words as the plain calls
