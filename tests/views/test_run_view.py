"""The run view without a browser: how MCP clients see it (with and without MCP Apps), the live record it
reads, its settings, and the HTTP pages' checks (the browser tests are in test_run_view_browser.py)."""

from __future__ import annotations

import base64
import json
import re
import subprocess

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client

from mcp_team.errors import ConfigError
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.server.views.run_view import RUN_VIEW_URI, ViewSettings, view_settings
from support import MCP_TEAM, clean_env, plain_http_async, serve_http

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

APPS = advertise("io.modelcontextprotocol/ui", {"mimeTypes": ["text/html;profile=mcp-app"]})
REQUEST = "Research bees, calculate 2+2 and write a short report"
TOKEN = "pages-token-9e1f"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def offline(**kw: object) -> ModelSettings:
    return ModelSettings(model="offline", **kw)  # type: ignore[arg-type]


async def test_run_team_points_at_the_view_which_is_one_self_contained_document(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode, extensions=[APPS]) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        (content,) = (await client.read_resource(RUN_VIEW_URI)).contents

    assert tools["run_team"].meta == {"ui": {"resourceUri": RUN_VIEW_URI}}
    assert tools["plan_team"].meta is None
    assert content.mime_type == "text/html;profile=mcp-app"
    assert content.meta == {"ui": {"csp": {}, "prefersBorder": True}}  # no outside connections or resources
    html = content.text
    assert html.startswith("<!doctype html>") and "</html>" in html
    assert '"mode": "app"' in html and "ui/initialize" in html and "renderRun" in html  # the scripts are inlined
    # nothing is loaded from anywhere: no src/href attributes, no stylesheet links, no URL but the SVG namespace
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=|<link\b", html)
    assert set(re.findall(r"https?://[^\s\"'`)]+", html)) == {"http://www.w3.org/2000/svg"}


async def test_a_client_without_apps_gets_the_same_result(mode: str) -> None:
    results = []
    for extensions in ([], [APPS]):
        async with Client(build_server(offline()), mode=mode, extensions=extensions) as client:
            results.append(await client.call_tool("run_team", {"request": REQUEST}))
    plain, with_apps = results

    assert plain.is_error is False and plain.meta == with_apps.meta
    assert [c.type for c in plain.content] == [c.type for c in with_apps.content] == ["text", "text"]  # answer, JSON
    volatile = {"run_id", "trace_id", "started_at", "ended_at"}

    def stable(result):  # type: ignore[no-untyped-def]
        data = {k: v for k, v in result.structured_content.items() if k not in volatile}
        data["handoffs"] = [{k: v for k, v in h.items() if k not in volatile} for h in data["handoffs"]]
        return data

    assert stable(plain) == stable(with_apps)
    assert plain.structured_content["status"] == "complete"


async def test_the_record_is_readable_while_the_run_goes_and_is_the_result_at_the_end() -> None:
    server = build_server(offline(offline_latency_ms=150))
    result = {}
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()  # a handoff started: its record was saved before the progress was sent

    async with Client(server) as client:

        async def run() -> None:
            result["run"] = await client.call_tool("run_team", {"request": REQUEST}, progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            runs = json.loads((await client.read_resource("team://runs")).contents[0].text)["runs"]
            (live,) = [r for r in runs if r["status"] == "running"]
            current = await _record(client, live["run_id"])
        final = await _record(client, live["run_id"])

    assert current["status"] == "running" and current["handoffs"][0]["status"] == "running"
    assert current["trace_id"] == final["trace_id"] and current["started_at"] == final["started_at"]
    # the record of a run is its result, with what the store knows besides (its thread, whether it resumes...)
    returned = result["run"].structured_content
    assert final["status"] == "complete" and {k: final.get(k) for k in returned} == returned


async def _record(client: Client, run_id: str) -> dict:
    return json.loads((await client.read_resource(f"team://runs/{run_id}")).contents[0].text)


def test_trace_links_from_a_base_url_or_a_template(monkeypatch: pytest.MonkeyPatch) -> None:
    jaeger = ViewSettings(trace_ui_url="http://localhost:16686/")
    assert jaeger.trace_link() == "http://localhost:16686/trace/{trace_id}"
    template = "https://grafana.example/explore?traceId={trace_id}"
    assert ViewSettings(trace_ui_url=template).trace_link() == template
    assert ViewSettings().trace_link() is None
    monkeypatch.setenv("MCP_TEAM_TRACE_UI_URL", "localhost:16686")
    with pytest.raises(ConfigError, match=r"MCP_TEAM_TRACE_UI_URL.*http:// or https://"):
        view_settings()


def test_a_bad_trace_url_stops_the_server_with_a_clear_error() -> None:
    done = subprocess.run(
        [MCP_TEAM, "serve", "--http", "--port", "1"],
        env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_TRACE_UI_URL="jaeger:16686"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "MCP_TEAM_TRACE_UI_URL" in done.stderr and "Traceback" not in done.stderr


async def test_the_pages_have_the_same_checks_as_mcp_and_serve_the_same_record() -> None:
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_HTTP_TOKEN=TOKEN)) as base:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with plain_http_async(base_url=base, timeout=60) as http:
            for path in ("/runs", "/runs/x", "/runs.json", "/runs/x.json"):
                refused = await http.get(path)
                assert refused.status_code == 401, path
                assert refused.headers["www-authenticate"].startswith("Basic")
                assert (await http.get(path, headers={"Authorization": "Bearer wrong"})).status_code == 401
            basic = base64.b64encode(f"operator:{TOKEN}".encode()).decode()
            page = await http.get("/runs", headers={"Authorization": f"Basic {basic}"})
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert "connect-src 'self'" in page.headers["content-security-policy"]
            assert '"mode": "http"' in page.text and '"runId": null' in page.text
            assert (await http.get("/runs", headers={**bearer, "Host": "evil.example:80"})).status_code == 421
            assert (await http.get("/runs", headers={**bearer, "Origin": "http://evil.example"})).status_code == 403
            assert (await http.get("/healthz")).status_code == 200

            async with (
                plain_http_async(headers=bearer, timeout=60) as mcp_http,
                Client(streamable_http_client(f"{base}/mcp", http_client=mcp_http)) as client,
            ):
                run = (await client.call_tool("run_team", {"request": REQUEST})).structured_content
                resource = (await client.read_resource(f"team://runs/{run['run_id']}")).contents[0].text
                listing = (await client.read_resource("team://runs")).contents[0].text
            record = await http.get(f"/runs/{run['run_id']}.json", headers=bearer)
            assert record.headers["content-type"] == "application/json" and record.text == resource
            assert (await http.get("/runs.json", headers=bearer)).text == listing
            page = await http.get(f"/runs/{run['run_id']}", headers=bearer)
            assert f'"runId": "{run["run_id"]}"' in page.text
            missing = await http.get("/runs/nope.json", headers=bearer)
            assert missing.status_code == 404 and "no run 'nope'" in missing.text
            missing = await http.get("/runs/nope", headers=bearer)  # the view, which says so, with a 404
            assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
            assert '"runId": "nope"' in missing.text
