"""The run view in a real browser (Debian's headless chromium, driven by Playwright), against
`mcp-team serve --http` running offline runs with parallel handoffs, a retry that recovers and a
specialist that keeps failing:

- as an MCP App, loaded by a host page built on the ext-apps `AppBridge` (the reference host side);
- as the operator pages /runs and /runs/{id}.

Both must follow the run while it goes and show the lanes, the bars, the failures and the totals of
the same record as team://runs/{id}. Screenshots go to test-artifacts/ (or $MCP_TEAM_TEST_ARTIFACTS).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Browser, expect, sync_playwright

from support import clean_env, plain_http_async, serve_http
from support.chromium import ARTIFACTS, LAUNCH_ARGS, ensure_chromium, host_bundle, open_in_host

# The first test may install chromium and the npm packages of the test host.
pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.browser,
]

TOKEN = "view-token-5b2d8c"
TRACE_UI = "http://jaeger.test:16686"
REQUEST = "Research bees, calculate 12*(3+4)/2, write a python function for it, then write a report and review it"

# Runs in every frame before its scripts: records each distinct state the view draws.
RECORDER = """
(() => {
  const states = (window.__viewStates = []);
  const record = () => {
    const run = document.querySelector("article.run");
    if (!run) return;
    const bars = [...run.querySelectorAll(":scope > .timeline-box .bar[data-handoff]")];
    const state = { status: run.dataset.status, bars: bars.length,
                    running: bars.filter((b) => b.classList.contains("running")).length };
    const last = states[states.length - 1];
    if (!last || JSON.stringify(last) !== JSON.stringify(state)) states.push(state);
  };
  new MutationObserver(record).observe(document, { childList: true, subtree: true });
})();
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = clean_env(
        MCP_TEAM_MODEL="offline",
        MCP_TEAM_OFFLINE_LATENCY_MS="400",  # a run takes seconds: long enough to watch it
        MCP_TEAM_OFFLINE_FAULTS="rate_limit:researcher:1,server_error:coder",
        MCP_TEAM_HTTP_TOKEN=TOKEN,
        MCP_TEAM_TRACE_UI_URL=TRACE_UI,
        MCP_TEAM_TRACE_DIR=str(tmp_path_factory.mktemp("traces")),  # tracing on: runs get trace ids
    )
    with serve_http(env=env) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = ensure_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def bundle() -> str:
    return host_bundle()


def test_the_app_in_an_mcp_apps_host_follows_the_run(server: str, browser: Browser, bundle: str) -> None:
    page = browser.new_page(viewport={"width": 760, "height": 1600})
    page.set_default_timeout(120_000)
    requests: list[tuple[bool, str]] = []
    page.on("request", lambda r: requests.append((r.frame == page.main_frame, r.url)))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.add_init_script(RECORDER)
    open_in_host(page, server, bundle, REQUEST, TOKEN)

    view = page.frame_locator("iframe")
    view.locator("article.run[data-status=running] .bar[data-handoff]").first.wait_for()
    view.locator("article.run[data-status=partial]").wait_for()
    page.wait_for_function("window.host.toolResult !== null")
    host: dict[str, Any] = page.evaluate("window.host")
    assert host["error"] is None, host["log"]
    run = host["toolResult"]["structuredContent"]
    assert run["status"] == "partial"
    # the researcher's first attempt hit the 429 and its retry recovered
    assert any(f["specialist"] == "researcher" and f["recovered"] for f in run["failures"])
    assert host["resource"]["mimeType"] == "text/html;profile=mcp-app"
    assert host["resource"]["meta"]["ui"]["csp"] == {}  # no outside connections or resources

    frame = page.frames[1]
    assert_live(frame.evaluate("window.__viewStates"), len(run["handoffs"]))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("iframe").screenshot(path=ARTIFACTS / "run-view-app-light.png")
    assert_run_drawn(view, run)
    assert view.locator("a.trace").get_attribute("href") == f"{TRACE_UI}/trace/{run['trace_id']}"
    view.locator("a.trace").click()  # a sandboxed frame cannot open it: it asks the host (ui/open-link)
    page.wait_for_function("(window.host.openedLinks || []).length === 1")
    assert page.evaluate("window.host.openedLinks") == [f"{TRACE_UI}/trace/{run['trace_id']}"]

    # the frame is sized to the view (ui/notifications/size-changed)
    height = page.evaluate("window.host.sizes.at(-1).height")
    assert height > 400
    assert page.locator("iframe").bounding_box()["height"] == pytest.approx(height, abs=2)

    # theme from the host (ui/notifications/host-context-changed)
    assert frame.evaluate("document.documentElement.dataset.theme") == "light"
    page.evaluate("window.host.setTheme('dark')")
    frame.wait_for_function("document.documentElement.dataset.theme === 'dark'")
    page.locator("iframe").screenshot(path=ARTIFACTS / "run-view-app-dark.png")

    assert page.evaluate("window.host.teardown()") == {}  # ui/resource-teardown is answered
    assert not errors
    assert all(url.startswith(server) for _, url in requests), requests
    assert [url for main, url in requests if not main] == []  # the view itself fetches nothing
    page.close()


def test_the_app_shows_a_run_that_failed_from_the_tool_error(browser: Browser, bundle: str) -> None:
    # Every specialist fails: run_team answers with a tool error naming the run, and the view reads it.
    faults = "server_error:researcher,server_error:analyst"
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_FAULTS=faults)) as base:
        page = browser.new_page()
        page.set_default_timeout(120_000)
        open_in_host(page, base, bundle, "Research bees and calculate 2+2")
        page.frame_locator("iframe").locator("article.run[data-status=failed]").wait_for()
        result = page.evaluate("window.host.toolResult")
        run_id = page.frame_locator("iframe").locator("article.run").get_attribute("data-run")
        failed = page.frame_locator("iframe").locator(".bar.failed[data-handoff]").count()
        page.close()
    assert result["isError"] is True and f"team://runs/{run_id}" in result["content"][0]["text"]
    assert failed == 6  # researcher and analyst, three attempts each


def test_the_runs_pages_follow_a_run_and_open_past_runs(server: str, browser: Browser) -> None:
    # No research here: the researcher's one injected 429 stays for the other test, whichever runs first.
    request = "Calculate 12*(3+4)/2, write a python function for it, then write a report and review it"
    context = browser.new_context(
        viewport={"width": 900, "height": 1000}, http_credentials={"username": "operator", "password": TOKEN}
    )
    context.set_default_timeout(120_000)
    context.add_init_script(RECORDER)
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    runs_page = context.new_page()
    runs_page.goto(f"{server}/runs")
    runs_page.locator(".run-list").wait_for()

    result: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: result.update(anyio.run(_run_team, server, request)))
    caller.start()
    run_id = _wait_for_running(server, request)

    page = context.new_page()
    page.goto(f"{server}/runs/{run_id}")
    page.locator("article.run[data-status=partial]").wait_for()
    caller.join()
    record = _get(server, f"/runs/{run_id}.json")
    # the page's JSON is the record the tool returned, with the run store's fields (status, reason, ...)
    assert {k: v for k, v in record.items() if k in result["structured"]} == result["structured"]
    assert_live(page.evaluate("window.__viewStates"), len(record["handoffs"]))
    assert_run_drawn(page, record)
    assert page.locator("a.trace").get_attribute("href") == f"{TRACE_UI}/trace/{record['trace_id']}"

    # the list page, opened before the run, shows it without a reload
    runs_page.locator(f"tr[data-run='{run_id}'][data-status=partial]").wait_for()

    # narrow, dark: what a chat's side panel or a phone gives it
    page.set_viewport_size({"width": 390, "height": 900})
    page.emulate_media(color_scheme="dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")  # (wait_for_function would need eval)
    lanes = page.locator(".timeline .lane").all()
    assert all(lane.bounding_box()["width"] <= 390 for lane in lanes)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / "run-view-narrow-dark.png", full_page=True)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 900, "height": 1000})
    page.screenshot(path=ARTIFACTS / "run-view-page.png", full_page=True)

    # any past run opens by its id; an unknown id says so
    runs_page.fill("input[name=run]", run_id)
    runs_page.click("button[type=submit]")
    runs_page.locator(f"article.run[data-run='{run_id}']").wait_for()
    runs_page.goto(f"{server}/runs/no-such-run")
    expect(runs_page.locator("#notice")).to_contain_text("no run 'no-such-run'")  # the page fetches it after load
    assert all(url.startswith(server) for url in requests), requests
    context.close()


def test_a_planned_run_shows_its_plan_as_a_graph(server: str, browser: Browser) -> None:
    # No research and no code here: the injected faults stay for the other tests.
    done: dict[str, Any] = {}  # in a thread of its own: Playwright's sync API holds this thread's event loop
    caller = threading.Thread(
        target=lambda: done.update(anyio.run(_run_team, server, "Calculate 6*7, then write a short report", "planned"))
    )
    caller.start()
    caller.join()
    run = done["structured"]
    tasks = run["plan"]["tasks"]
    assert run["mode"] == "planned" and len(tasks) >= 2
    page = browser.new_page(http_credentials={"username": "operator", "password": TOKEN})
    page.set_default_timeout(120_000)
    page.goto(f"{server}/runs/{run['run_id']}")
    page.locator("article.run section.plan svg").wait_for()
    assert page.locator("section.plan h2").text_content() == f"Plan · {len(tasks)} tasks"
    nodes = page.locator("section.plan g.node").evaluate_all(
        "ns => ns.map(n => [n.dataset.task, n.getAttribute('class')])"
    )
    status = {h["call_id"]: h["status"] for h in run["handoffs"]}
    assert {task: cls.split()[-1] for task, cls in nodes} == {t["id"]: status.get(t["id"], "pending") for t in tasks}
    # a task after another is drawn in a later column, with an edge from the one it depends on
    edges = sum(len(t.get("depends_on") or []) for t in tasks)
    assert page.locator("section.plan path.edge").count() == edges
    page.close()


def test_a_run_waiting_at_a_checkpoint_says_so_on_its_page_and_in_the_list(browser: Browser, tmp_path: Path) -> None:
    # The pages drew a waiting run as one that goes on ("running", its supervisor "thinking"): the checkpoint and
    # what was to be approved were only under "More", as JSON, and the list did not show it at all.
    team = tmp_path / "team.toml"
    team.write_text(TEAM_WAITING)
    with serve_http("--team", str(team), env=clean_env(MCP_TEAM_MODEL="offline")) as base:
        run_id = _call(base, "start_run", {"request": "Research bees, then write a short report"})["run_id"]
        context = browser.new_context(viewport={"width": 900, "height": 1000})
        context.set_default_timeout(120_000)
        page, runs_page = context.new_page(), context.new_page()
        page.goto(f"{base}/runs/{run_id}")
        runs_page.goto(f"{base}/runs")
        box = page.locator("article.run[data-status=running] section.waiting[data-checkpoint='before:writer']")
        box.wait_for()
        record = _get(base, f"/runs/{run_id}.json")
        assert record["waiting"]["name"] == "before:writer" and box.get_attribute("data-round") == "1"
        assert "At checkpoint before:writer: nothing goes on until someone answers it" in box.inner_text()
        assert all(line in box.inner_text() for line in record["waiting"]["summary"].splitlines())  # all of it
        assert "waiting" in page.locator("[data-lane=supervisor] .bar.live").inner_text()  # not "thinking"
        assert "waiting" not in page.locator("section.more dt").all_inner_texts()  # not again, as JSON
        row = runs_page.locator(f"tr[data-run='{run_id}'][data-waiting='before:writer']")
        expect(row.locator(".badge.waiting")).to_have_text("waits at before:writer")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=ARTIFACTS / "run-view-waiting.png", full_page=True)

        _call(base, "answer_checkpoint", {"run_id": run_id, "decision": "approve"})
        page.locator("article.run[data-status=complete]").wait_for()
        assert page.locator("section.waiting").count() == 0
        runs_page.locator(f"tr[data-run='{run_id}'][data-status=complete]:not([data-waiting])").wait_for()
        context.close()


TEAM_WAITING = """
[supervisor]
checkpoints = ["before:writer"]

[[specialists]]
name = "researcher"
description = "Finds facts."
prompt = "Find facts."

[[specialists]]
name = "writer"
description = "Writes reports."
prompt = "Write."
"""


def assert_live(states: list[dict[str, Any]], handoffs: int) -> None:
    """The view drew the run while it went: running states with bars coming in, then the final one."""
    running = [s for s in states if s["status"] == "running"]
    assert running and running[-1]["bars"] > 0, states
    assert any(s["running"] > 0 for s in running), states
    assert len({s["bars"] for s in running}) > 1 or len(running) > 1, states  # more than one live picture
    assert [s["bars"] for s in running] == sorted(s["bars"] for s in running), states
    assert states[-1] == {"status": "partial", "bars": handoffs, "running": 0}, states


def assert_run_drawn(scope: Any, run: dict[str, Any]) -> None:
    """Lanes, bars, failures and totals on the page match the run record."""
    handoffs = run["handoffs"]
    targets = list(dict.fromkeys(h["target"] for h in handoffs))
    assert scope.locator(".timeline .lane").evaluate_all("ls => ls.map(l => l.dataset.lane)") == [
        "supervisor",
        *targets,
    ]
    assert {"analyst", "coder", "writer", "reviewer"} <= set(targets)
    bars = scope.locator(".timeline .bar[data-handoff]").evaluate_all(
        "bs => bs.map(b => [b.dataset.handoff, b.className, b.closest('.lane').dataset.lane])"
    )
    drawn = {hid: (cls.split(), lane) for hid, cls, lane in bars}
    assert set(drawn) == {h["id"] for h in handoffs}
    for h in handoffs:
        classes, lane = drawn[h["id"]]
        assert h["status"] in classes and lane == h["target"]
        assert ("retry" in classes) == (h["attempt"] > 1)
    # parallel branches side by side: the first turn's coder starts while its analyst still runs, in the record
    # and on the page. (Not the other way round too: the coder's fault ends it within milliseconds, and under load
    # the analyst's start was recorded 5 ms after that end: both were started by the same turn all the same.)
    first = {h["target"]: h for h in reversed(handoffs) if h["attempt"] == 1}
    assert first["coder"]["started_at"] < first["analyst"]["ended_at"]
    analyst, coder = (
        scope.locator(f".bar[data-handoff='{first[t]['id']}']").bounding_box() for t in ("analyst", "coder")
    )
    assert coder["x"] < analyst["x"] + analyst["width"]
    failed_bar = scope.locator(f".bar[data-handoff='{first['coder']['id']}']")
    assert "server_error" in failed_bar.inner_text() and "HTTP 500" in failed_bar.get_attribute("title")
    assert "synthesis" in scope.locator("[data-lane=supervisor]").inner_text()

    failures = scope.locator(".problems li.failure").evaluate_all(
        "ls => ls.map(l => [l.classList.contains('recovered'), l.innerText])"
    )
    assert len(failures) == len(run["failures"])
    for (recovered, text), failure in zip(failures, run["failures"], strict=True):
        assert recovered == failure["recovered"]
        assert failure["specialist"] in text and f"{failure['kind']}: {failure['reason']}" in text
    assert any(f["specialist"] == "coder" and not f["recovered"] for f in run["failures"])

    total = run["usage"]["total"]
    assert scope.locator("[data-total=tokens] dd").inner_text() == f"{total['input_tokens'] + total['output_tokens']:,}"
    assert scope.locator("[data-total=handoffs] dd").inner_text().startswith(f"{len(handoffs)} (")
    assert scope.locator("[data-total=model-calls] dd").inner_text() == str(run["usage"]["model_calls"])
    assert scope.locator("header .badge").inner_text() == run["status"]

    # a handoff's details: task, expected output and the result behind a click
    done = next(h for h in handoffs if h["status"] == "completed" and h["target"] == "analyst")
    card = scope.locator(f"details.handoff[data-key='{run['run_id']}:{done['id']}']")
    card.locator(":scope > summary").click()
    assert done["task"][:40] in card.inner_text()
    card.locator("details.long[data-key$=':output'] > summary").click()
    assert done["output"].strip().splitlines()[-1] in card.locator("details.long[data-key$=':output'] pre").inner_text()


async def _run_team(server: str, request: str, mode: str = "adaptive") -> dict[str, Any]:
    http = plain_http_async(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    async with http, Client(streamable_http_client(f"{server}/mcp", http_client=http)) as client:
        result = await client.call_tool("run_team", {"request": request, "mode": mode})
    return {"structured": result.structured_content}


def _call(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`tool`'s result, called by an MCP client of the server (which has no token), in a thread of its own:
    Playwright's sync API holds this thread's event loop."""

    async def call() -> Any:
        http = plain_http_async(timeout=120)
        async with http, Client(streamable_http_client(f"{server}/mcp", http_client=http)) as client:
            return await client.call_tool(tool, arguments)

    done: list[Any] = []
    caller = threading.Thread(target=lambda: done.append(anyio.run(call)))
    caller.start()
    caller.join()
    (result,) = done
    assert not result.is_error and result.structured_content is not None, result.content
    return dict(result.structured_content)


def _get(server: str, path: str) -> Any:
    response = httpx2.get(f"{server}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    response.raise_for_status()
    return json.loads(response.text)


def _wait_for_running(server: str, request: str) -> str:
    """The id of the run of `request`, once the server lists it as running."""
    while True:
        for run in _get(server, "/runs.json")["runs"]:
            if run["request"] == request[:200] and run["status"] == "running":
                return str(run["run_id"])
        time.sleep(0.05)
