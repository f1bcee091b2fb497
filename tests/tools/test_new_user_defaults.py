"""Defaults a new user meets (issue 35): the built-in researcher reads the web with `fetch_url` (today's address
rules: a private address is refused); a preset whose gates fail on the offline backend's stand-in text says so
instead of ending a puzzling `partial`. Through the CLI and an MCP client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_team.llm import ModelRequest, ModelResponse, ToolResultBlock, ToolUseBlock
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team_file
from support import cli_here
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

KEY = "sk-proj-test-SECRET-0123456789"
OFFLINE_GATES = "briefing_writer's quality gates judge a model's real text"


@pytest.fixture
def secret_page() -> Iterator[str]:
    """A page on 127.0.0.1 that a fetch from the team must never read (as a cloud metadata service would be)."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"the-secret-token")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/latest/meta-data"
    server.shutdown()


def fetching_brain(url: str, seen: list[str]) -> Any:
    """The offline model, but the researcher first fetches `url`; what its tool said is kept in `seen`."""

    def brain(request: ModelRequest) -> ModelResponse:
        if request.member == "researcher":
            results = [b for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
            if not results:
                assert "fetch_url" in {t.name for t in request.tools}, [t.name for t in request.tools]
                call = ToolUseBlock(id="fetch_1", name="fetch_url", input={"url": url})
                return ModelResponse(content=[call], stop_reason="tool_use", model="gpt-4o-mini")
            seen.extend(r.content for r in results)
        return offline_brain(request)

    return brain


async def test_the_default_researcher_reads_the_web_under_the_address_rules(secret_page: str) -> None:
    seen: list[str] = []
    with FakeOpenAIAPI(brain=fetching_brain(secret_page, seen)) as api:
        settings = ModelSettings(model="openai:gpt-4o-mini", openai_base_url=api.base_url, openai_api_key=KEY)  # type: ignore[arg-type]
        async with Client(build_server(settings)) as client:  # the built-in default team
            result = await client.call_tool("researcher", {"task": f"What does {secret_page} say?"})
    assert not result.is_error, result.content
    (said,) = seen
    assert "private addresses are blocked" in said and "the-secret-token" not in said


def test_init_writes_the_researcher_with_its_web_tool(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    assert cli_here("init", str(team)).returncode == 0
    text = team.read_text()
    researcher = text[text.index('name = "researcher"') :]
    assert researcher[: researcher.index("[[specialists]]")].count('tools = ["fetch_url"]') == 1
    assert cli_here("check", "--team", str(team), MCP_TEAM_MODEL="offline").returncode == 0


def test_an_offline_run_of_a_preset_with_gates_says_why_it_is_partial(tmp_path: Path) -> None:
    assert cli_here("init", "--preset", "research-desk", cwd=tmp_path).returncode == 0
    proc = cli_here("run", "--ephemeral", "--model", "offline", "Brief me on solid-state batteries", cwd=tmp_path)
    assert proc.returncode == 3 and "partial:" in proc.stderr  # partial, as before...
    (note,) = [line for line in proc.stderr.splitlines() if line.startswith("note: ") and OFFLINE_GATES in line]
    assert "offline backend writes stand-in text that cannot pass them" in note  # ...and why
    assert "required_sections" in note and "leave gates out" in note


async def test_run_team_says_so_too(tmp_path: Path) -> None:
    assert cli_here("init", "--preset", "research-desk", cwd=tmp_path).returncode == 0
    server = build_server(ModelSettings(model="offline"), load_team_file(tmp_path / "team.toml"))  # type: ignore[call-arg]
    async with Client(server) as client:
        result = await client.call_tool("run_team", {"request": "Brief me on solid-state batteries"})
    run = result.structured_content
    assert run is not None and run["status"] == "partial"
    assert any(OFFLINE_GATES in n for n in run["notes"])
    assert OFFLINE_GATES in result.content[0].text  # in what a host reads, too
