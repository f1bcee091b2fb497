"""CORS on /mcp (issue 35): off by default (a preflight gets 405, as before); with MCP_TEAM_CORS=true a browser page
on an allowed origin can call /mcp (preflight answered, the MCP headers readable), and one on another origin cannot.
Against `mcp-team serve --http`, with plain HTTP and from a page in Debian's headless chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Route, sync_playwright

from support import clean_env, plain_http, serve_http
from support.chromium import LAUNCH_ARGS, ensure_chromium

pytestmark = [pytest.mark.timeout(900), pytest.mark.process, pytest.mark.browser]

APP = "https://app.example"  # the web app's origin: allowed
OTHER = "https://evil.example"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "web", "version": "1"}},
}


# A public page calling a loopback address needs a person's permission in Chromium (Local Network Access), which a
# headless browser denies: that is the browser's own gate, before CORS, and a deployed server is not on loopback.
NO_LOCAL_ACCESS = (
    "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights,BlockInsecurePrivateNetworkRequests"
)


def preflight(base: str, origin: str) -> dict[str, str] | int:
    with plain_http() as http:
        response = http.options(
            f"{base}/mcp",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
            },
        )
    return {k.lower(): v for k, v in response.headers.items()} if response.status_code == 200 else response.status_code


@pytest.fixture(scope="module")
def cors() -> Iterator[str]:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_CORS="true", MCP_TEAM_ALLOWED_ORIGINS=json.dumps([APP]))
    with serve_http(env=env) as base:
        yield base


def test_cors_is_off_by_default() -> None:
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_ALLOWED_ORIGINS=json.dumps([APP]))) as base:
        assert preflight(base, APP) == 405


def test_a_preflight_from_an_allowed_origin_is_answered(cors: str) -> None:
    answer = preflight(cors, APP)
    assert isinstance(answer, dict), answer
    assert answer["access-control-allow-origin"] == APP
    assert "POST" in answer["access-control-allow-methods"]
    allowed = answer["access-control-allow-headers"].lower()
    assert all(h in allowed for h in ("authorization", "content-type", "mcp-protocol-version", "mcp-session-id"))
    local = preflight(cors, "http://localhost:5173")  # loopback origins are allowed, as by the Origin check
    assert isinstance(local, dict) and local["access-control-allow-origin"] == "http://localhost:5173"
    assert preflight(cors, OTHER) == 400  # not an allowed origin


def test_an_answer_to_an_allowed_origin_exposes_the_mcp_headers(cors: str) -> None:
    with plain_http() as http:
        response = http.post(
            f"{cors}/mcp",
            json=INITIALIZE,
            headers={"Origin": APP, "Accept": "application/json, text/event-stream"},
        )
        refused = http.post(
            f"{cors}/mcp", json=INITIALIZE, headers={"Origin": OTHER, "Accept": "application/json, text/event-stream"}
        )
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == APP
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "mcp-session-id" in exposed and "mcp-protocol-version" in exposed
    assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    with plain_http() as http:  # the run pages are same-origin: no CORS there
        page = http.get(f"{cors}/runs.json", headers={"Origin": APP})
    assert "access-control-allow-origin" not in page.headers


def test_a_page_on_an_allowed_origin_initializes_a_session(cors: str) -> None:
    """The real thing: a browser enforces CORS. The page is served (by the test) as if from the web app's origin;
    its fetch goes to the server on 127.0.0.1."""
    script = f"""
      const response = await fetch({json.dumps(cors + "/mcp")}, {{
        method: "POST",
        headers: {{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Mcp-Protocol-Version": "2025-11-25"}},
        body: {json.dumps(json.dumps(INITIALIZE))},
      }});
      window.result = {{status: response.status, session: response.headers.get("Mcp-Session-Id"),
                        text: await response.text()}};
    """
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=ensure_chromium(), args=[*LAUNCH_ARGS, NO_LOCAL_ACCESS])
        results = {}
        for origin in (APP, OTHER):
            page = browser.new_page()

            def serve(route: Route) -> None:
                route.fulfill(body=f"<!doctype html><script type=module>{script}</script>", content_type="text/html")

            page.route(f"{origin}/**", serve)
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text))
            page.goto(f"{origin}/index.html")
            if origin == APP:
                page.wait_for_function("window.result !== undefined")
                results[origin] = page.evaluate("window.result")
            else:
                page.wait_for_event("console", predicate=lambda m: "CORS" in m.text or "Failed to fetch" in m.text)
                results[origin] = page.evaluate("window.result === undefined")
            page.close()
        browser.close()
    app = results[APP]
    assert app["status"] == 200 and app["session"], app  # the session id read across origins
    assert '"protocolVersion"' in app["text"]
    assert results[OTHER] is True  # the browser refused the other origin's call
