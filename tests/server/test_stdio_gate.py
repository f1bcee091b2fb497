"""The stdio gate (server/transports/stdio.py): every line a client sends gets an answer, bad ones a JSON-RPC error.

Served by a small launcher (`serve_stdio(build_server())`) in a real subprocess, as `mcp-team serve` serves it
(tests/server/test_client_mistakes.py runs the same checks on `mcp-team serve`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from mcp_team.server.transports.messages import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, check_message
from mcp_team.server.transports.stdio import DEFAULT_MAX_MESSAGE_BYTES
from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, initialize, stdio_lines

pytestmark = [pytest.mark.process]

LAUNCHER = (
    "import anyio; from mcp_team.server.app import build_server; "
    "from mcp_team.server.transports.stdio import serve_stdio; "
    "anyio.run(serve_stdio, build_server())"
)
PING = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
BAD_LINES = {
    "garbage": ("hello, server", None, PARSE_ERROR),
    "invalid JSON": ('{"jsonrpc": "2.0", "id": 3, "method": ', None, PARSE_ERROR),
    "params not an object": ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}', 5, INVALID_PARAMS),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, None, PARSE_ERROR),
    # Too deep, with its id before the nesting: answered on that id, or a client waiting on it would hang.
    "deep nesting, id first": ('{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"a":' + "[" * 200 + "]" * 200
                               + "}}", 41, PARSE_ERROR),
    "deep nesting, id last": ('{"jsonrpc":"2.0","method":"x","params":{"a":' + "[" * 200 + "]" * 200 + '},"id":"d2"}',
                              "d2", PARSE_ERROR),
    "batch": ('[{"jsonrpc":"2.0","id":1,"method":"ping"}]', None, INVALID_REQUEST),
    "not JSON-RPC": ('{"id": 7, "method": "ping"}', 7, INVALID_REQUEST),
    # Too large to parse: the id is read from either end, as the Python (first) and TypeScript (last) SDKs write it.
    "too large": (json.dumps({"jsonrpc": "2.0", "id": 8, "method": "x", "params": {"t": "x" * 5_000_000}}), 8,
                  INVALID_REQUEST),
    "too large, id last": (json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"t": "x" * 5_000_000}, "id": "r9"}),
                           "r9", INVALID_REQUEST),
    "too large, id inside": (json.dumps({"method": "x", "params": {"id": 3, "t": "x" * 5_000_000}, "jsonrpc": "2.0"}),
                             None, INVALID_REQUEST),
    "too large, fraction id": (json.dumps({"jsonrpc": "2.0", "id": 7.5, "method": "x", "params": {"t": "x" * 5**10}}),
                               None, INVALID_REQUEST),  # not 7: another request's id
    # An id JSON-RPC allows but MCP does not: the SDK would take the request for a notification and never answer.
    "null id": ('{"jsonrpc":"2.0","id":null,"method":"ping"}', None, INVALID_REQUEST),
    "object id": ('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, INVALID_REQUEST),
    "fraction id": ('{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, INVALID_REQUEST),
}  # fmt: skip


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_check_message_answers_each_bad_line(name: str) -> None:
    line, request_id, code = BAD_LINES[name]
    answer = check_message(line, DEFAULT_MAX_MESSAGE_BYTES)
    assert answer is not None and answer[:2] == (request_id, code)
    assert "Traceback" not in answer[2]


def test_check_message_lets_good_messages_through() -> None:
    client_error = {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "bad"}}  # may be null
    for message in (initialize(), INITIALIZED, PING, {"jsonrpc": "2.0", "id": 1, "result": {}}, client_error):
        assert check_message(json.dumps(message), DEFAULT_MAX_MESSAGE_BYTES) is None
    nested_text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"t": "[[[[" * 100}})
    assert check_message(nested_text, DEFAULT_MAX_MESSAGE_BYTES) is None  # brackets inside strings are text


def _exchange(
    *lines: str, env: dict[str, str] | None = None, command: tuple[str, ...] = (sys.executable, "-c", LAUNCHER)
) -> tuple[list[dict[str, Any]], str]:
    """Send the handshake, `lines` and a final ping over stdio to `command` (the transport alone, by default);
    every answer, in order."""
    text = stdio_lines(initialize(), INITIALIZED) + "".join(line + "\n" for line in lines) + stdio_lines(PING)
    proc = subprocess.run(
        command,
        input=text,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_env(MCP_TEAM_MODEL="offline", **(env or {})),
    )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr


def test_every_bad_line_is_answered_in_order_and_the_server_keeps_serving() -> None:
    answers, stderr = _exchange(*(line for line, _, _ in BAD_LINES.values()))
    assert answers[0]["id"] == 1 and "result" in answers[0]  # initialize
    errors = answers[1:-1]
    assert [(a["id"], a["error"]["code"]) for a in errors] == [(i, c) for _, i, c in BAD_LINES.values()]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert "Traceback" not in stderr


def test_the_limit_is_configurable() -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"pad": "x" * 5000}})
    # read by the command (cli/settings.py), which gives it to the transport
    answers, _ = _exchange(line, env={"MCP_TEAM_MAX_MESSAGE_BYTES": "2048"}, command=(MCP_TEAM, "serve"))
    assert answers[1]["error"]["code"] == INVALID_REQUEST and "2048" in answers[1]["error"]["message"]
    assert answers[-1]["id"] == 99


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_a_real_client_runs_the_team_through_the_gate(mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-c", LAUNCHER], env=clean_env(MCP_TEAM_MODEL="offline")
    )
    async with Client(params, mode=mode) as client:
        result = await client.call_tool("run_team", {"request": "Research bees and calculate 2+2"})
    assert result.structured_content is not None and result.structured_content["status"] == "complete"


def test_a_cancelled_request_gets_no_answer() -> None:
    """After `notifications/cancelled` the request is not answered (the spec: a receiver does not respond to a
    cancelled request); the server goes on answering the next one."""
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="2000")
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(stdio_lines(initialize(), INITIALIZED))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "run_team", "arguments": {"request": "Research bees"}, "_meta": {"progressToken": 7}},
        }
        proc.stdin.write(stdio_lines(call))
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())  # the run has begun: its first progress
        assert first.get("method") == "notifications/progress", first
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "no"}}
        proc.stdin.write(stdio_lines(cancel, PING))
        proc.stdin.flush()
        seen = []
        while (message := json.loads(proc.stdout.readline())).get("id") != 99:
            seen.append(message)
        assert not [m for m in seen if m.get("id") == 2], seen
    finally:
        proc.kill()
        proc.wait(timeout=HANG_GUARD)
