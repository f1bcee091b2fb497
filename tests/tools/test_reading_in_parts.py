"""A specialist of an MCP-served team reads a long file and a long page whole, a part at a time, going where each
part's note says: `read_file` with `offset`, `fetch_url` with `start`.

Before, both tools read only the beginning (a file's first `max_bytes`, a page's first `fetch_max_bytes` bytes),
the loop cut that at `max_result_chars` and told the model to "ask the tool for less at a time", which neither
tool could do: a researcher asked to summarize a long file or page saw only its beginning."""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_team.llm import ModelRequest, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team
from support.fake_openai_api import FakeOpenAIAPI
from support.local_http import LocalHTTPServer

pytestmark = pytest.mark.anyio

BEES = "🐝 bees dance é\n"  # multi-byte characters, so byte parts end inside them unless cut before
FILE_TEXT = "".join(f"{i:04} {BEES}" for i in range(400))  # numbered lines: a part read twice or skipped shows
PAGE_TEXT = "".join(f"{i:04} {BEES}" for i in range(400, 800))
NOTE = re.compile(r"\n\n\[part: [^\n]*\]\Z")
NEXT = re.compile(
    r"; call (read_file|fetch_url) again with (?:the same url and )?(offset|start)=(\d+) for the rest\]\Z"
)


class Page(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = PAGE_TEXT.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with LocalHTTPServer(Page, "long-page") as server:
        yield f"{server.url}/bees.txt"


class Reader:
    """The model behind the fake API: `reader` reads what its task names (a file or a URL) from its start,
    follows each part's note to the next, and answers with the parts' texts put together. It keeps its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        call = self.next_call(request)
        if isinstance(call, ToolUseBlock):
            self.calls.append((call.name, call.input))
            return ModelResponse(content=[call], stop_reason="tool_use", model="gpt-4o-mini")
        return ModelResponse(content=[TextBlock(text=call)], model="gpt-4o-mini")

    @staticmethod
    def next_call(request: ModelRequest) -> ToolUseBlock | str:
        (task,) = [b.text for b in request.messages[0].blocks if isinstance(b, TextBlock)]
        name, first = (
            ("fetch_url", {"url": task.split()[-1]}) if "http" in task else ("read_file", {"path": "bees.txt"})
        )
        results = [b.content for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
        follow = NEXT.search(results[-1]) if results else None
        if not results or follow:
            arguments = first if follow is None else {**first, follow[2]: int(follow[3])}
            return ToolUseBlock(id=f"c{len(results)}", name=name, input=arguments)
        if name == "fetch_url":
            results = [result.split("\n\n", 1)[1] for result in results]  # "URL: ...", a blank line, the text
        return "".join(NOTE.split(result)[0] for result in results)


async def test_a_specialist_reads_a_long_file_and_page_whole_in_parts(tmp_path: Path, page_url: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bees.txt").write_text(FILE_TEXT, encoding="utf-8")
    team = tmp_path / "team.toml"
    team.write_text(
        '[tools]\nread_dirs = ["docs"]\nfetch_allow_private = true\nmax_result_chars = 2000\n\n'
        '[[specialists]]\nname = "reader"\ndescription = "Reads."\nprompt = "Read all of it."\n'
        'tools = ["read_file", "fetch_url"]\nmax_turns = 20\n'
    )
    model = Reader()
    with FakeOpenAIAPI(brain=model) as api:
        settings = ModelSettings(model="openai:gpt-4o-mini", openai_api_key="sk-test", openai_base_url=api.base_url)
        async with Client(build_server(settings, load_team(str(team)))) as client:
            read = await client.call_tool("reader", {"task": "Read the file bees.txt"})
            fetched = await client.call_tool("reader", {"task": f"Read the page {page_url}"})

    for result, whole in ((read, FILE_TEXT), (fetched, PAGE_TEXT)):
        assert not result.is_error, result.content
        assert result.structured_content["output"] == whole  # type: ignore[index]  # all of it, each part once
    # Both came in parts (8,000 characters each, at most 2,000 at a time), each from where the last ended.
    files = [arguments.get("offset", 0) for name, arguments in model.calls if name == "read_file"]
    pages = [arguments.get("start", 0) for name, arguments in model.calls if name == "fetch_url"]
    assert len(files) >= 5 and len(pages) >= 5 and files == sorted(set(files)) and pages == sorted(set(pages))
