"""No known secret at rest: a durable run on `mcp-team serve --http` that sees every kind of secret (the model's API
key, the server's bearer token, an MCP server's env value, a secret in the request, the same env value coming
back in a tool result), and a recorded `mcp-team run` of the same, leave none of them anywhere in the state
directory: the runs database with its WAL (the run rows and DBOS's inputs, outputs and step results), the
recording, the trace files, the server's log. What reads the database (`team://runs`, `/runs.json`,
`mcp-team runs show --json`) shows `[redacted]` where the secret was, and the recording still replays.

The model is a fake OpenAI-compatible API in this process (the real SDK over a socket): the specialist `scout`
calls the echo server's `env` tool for the server's secret, then reports what came back; the supervisor is the
offline model."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_team.llm import ModelRequest, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from support import ECHO_MCP_SERVER_FILE, HANG_GUARD, clean_env, cli_here, plain_http_async, serve_http_process
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.process, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

API_KEY = "sk-" + secrets.token_hex(16)  # the model's key (env), also a secret-looking shape
HTTP_TOKEN = "tok-" + secrets.token_hex(12)  # the server's bearer token
MCP_ENV = "mcpenv-" + secrets.token_hex(12)  # an MCP server's env value, which its tool also returns
IN_REQUEST = "sk-" + secrets.token_hex(15)  # a key a user pasted into a request
SECRETS = {"API key": API_KEY, "bearer token": HTTP_TOKEN, "MCP server env": MCP_ENV, "request": IN_REQUEST}
REQUEST = f"Check the deployment settings; my OpenAI key is {IN_REQUEST} in case you need it."
TEAM = f"""
[[mcp_servers]]
name = "echo"
command = {json.dumps(sys.executable)}
args = [{json.dumps(ECHO_MCP_SERVER_FILE)}]
allowed_tools = ["env"]
env = {{ DEPLOY_SECRET = "{MCP_ENV}" }}

[[specialists]]
name = "scout"
description = "Looks up the deployment's settings."
prompt = "Look the settings up with your env tool."
tools = ["echo/env"]
"""


def brain(request: ModelRequest) -> ModelResponse:
    """`scout` calls `env` for the echo server's secret, then reports the result as it came (a tool result
    holding a secret, and an answer quoting it); everyone else is the offline model."""
    if not any(t.name == "env" for t in request.tools):
        return offline_brain(request)
    results = [b for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    if not results:
        call = ToolUseBlock(id="env1", name="env", input={"name": "DEPLOY_SECRET"})
        return ModelResponse(content=[call], stop_reason="tool_use", model="gpt-4o-mini")
    return ModelResponse(content=[TextBlock(text=f"The server says: {results[0].content}")], model="gpt-4o-mini")


def found_in(directory: Path) -> dict[str, list[str]]:
    """Each secret, with the files under `directory` holding it (as bytes: databases, WAL, logs alike)."""
    files = [p for p in directory.rglob("*") if p.is_file()]
    return {name: [str(p) for p in files if value.encode() in p.read_bytes()] for name, value in SECRETS.items()}


async def served_run(base: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A run through the server, as a client with its token starts and follows it; its id, `team://runs` and
    `/runs.json` after."""
    auth = {"Authorization": f"Bearer {HTTP_TOKEN}"}
    async with (
        plain_http_async(headers=auth, timeout=HANG_GUARD) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        started = await client.call_tool("start_run", {"request": REQUEST})
        run_id = started.structured_content["run_id"]  # type: ignore[index]
        done = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 50})
        record = done.structured_content
        assert record is not None and record["status"] == "complete", done.content
        assert "DEPLOY_SECRET=[redacted]" in json.dumps(record)  # the tool result was there, redacted
        listing = json.loads((await client.read_resource("team://runs")).contents[0].text)  # type: ignore[union-attr]
        pages = (await http.get(f"{base}/runs.json")).json()
    return run_id, listing, pages


def test_a_run_that_sees_every_kind_of_secret_leaves_none_in_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "traces").mkdir(parents=True)
    team = tmp_path / "team.toml"
    team.write_text(TEAM)
    log = state / "server.log"
    with FakeOpenAIAPI(brain=brain) as api:
        settings = {"MCP_TEAM_MODEL": "openai:gpt-4o-mini", "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": api.base_url,
                    "MCP_TEAM_HTTP_TOKEN": HTTP_TOKEN, "MCP_TEAM_STATE_DIR": str(state)}  # fmt: skip
        traces = ("--trace-dir", str(state / "traces"))
        with serve_http_process("--team", str(team), *traces, env=clean_env(**settings), stderr=log) as (base, _):
            run_id, listing, pages = anyio.run(served_run, base)
        # What reads the database from another process (which knows none of the server's secrets), and a recorded
        # run of the same (in this process: what they say is the point, not their process).
        shown = cli_here("runs", "show", run_id, "--json", **settings)
        assert shown.returncode == 0, shown.stderr
        recording = state / "recorded.jsonl"
        recorded = cli_here("run", "--team", str(team), "--record", str(recording), REQUEST, **settings)
        assert recorded.returncode == 0, recorded.stderr
        (state / "run.log").write_text(recorded.stderr)  # its log (stdout is the answer, to its caller)

    for what in (listing["runs"][0]["request"], pages["runs"][0]["request"], json.loads(shown.stdout)["request"]):
        assert IN_REQUEST not in what and "[redacted]" in what, what
    assert MCP_ENV not in shown.stdout and "DEPLOY_SECRET=[redacted]" in shown.stdout
    assert {name: where for name, where in found_in(state).items() if where} == {}
    assert list((state / "traces").glob("*.json")), "no trace file was written: the check above saw none"
    assert any(p.name.startswith("runs.sqlite") for p in state.iterdir())

    # The recording still replays (no model, no key: the recorded answers come back as they were).
    replayed = cli_here("run", "--team", str(team), "--model", f"replay:{recording}", MCP_TEAM_STATE_DIR=str(state))
    assert replayed.returncode == 0, replayed.stderr
    assert "DEPLOY_SECRET=[redacted]" in replayed.stdout, replayed.stdout


def test_the_stored_forms_are_redacted_and_read_back() -> None:
    """The two writers of the runs database: a run row, and DBOS's values through our serializer."""
    from mcp_team.runs.at_rest import record_json
    from mcp_team.runs.serializer import JSONSerializer
    from mcp_team.runs.types import RunRecord
    from mcp_team.telemetry.content import clear_secrets, register_secret

    register_secret(MCP_ENV)
    try:
        record = RunRecord.model_validate(
            {"run_id": "r1", "status": "running", "request": REQUEST, "executor_id": "e", "resumable": True,
             "app_version": "1", "started_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
        )  # fmt: skip
        stored = record_json(record)
        assert IN_REQUEST not in stored and RunRecord.model_validate_json(stored).request.count("[redacted]") == 1
        serializer = JSONSerializer()
        value: dict[str, Any] = {"result": f"DEPLOY_SECRET={MCP_ENV}", "api_key": "plain", "n": 3, "t": (1, "x")}
        text = serializer.serialize(value)
        assert MCP_ENV not in text and "plain" not in text
        assert serializer.deserialize(text) == {"result": "DEPLOY_SECRET=[redacted]", "api_key": "[redacted]", "n": 3,
                                                "t": (1, "x")}  # fmt: skip
    finally:
        clear_secrets()
