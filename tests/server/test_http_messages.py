"""Each POST body of a 2025-era HTTP client is one JSON-RPC message, or a short JSON-RPC error says what is
wrong with it (as on stdio, tests/server/test_stdio_gate.py), after the Host, Origin and Content-Type checks, and
without a session opened for it. Raw HTTP against `mcp-team serve --http`, so the bytes are what any client
sees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from support import HANG_GUARD, clean_env, initialize, serve_http

pytestmark = [pytest.mark.process]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIMIT = 4096


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_MAX_MESSAGE_BYTES=str(LIMIT))) as base:
        yield f"{base}/mcp"


BAD_BODIES = {
    "batch": ('[{"jsonrpc":"2.0","id":1,"method":"ping"}]', None, -32600, "batches are not supported"),
    "not JSON-RPC": ('{"hello": 1}', None, -32600, "not a JSON-RPC 2.0 message (jsonrpc: Field required"),
    "not an object": ('"ping"', None, -32600, "a JSON-RPC message is a JSON object"),
    "not JSON": ("ping, please", None, -32700, "parse error: not JSON"),
    "too deep, id first": (
        '{"jsonrpc":"2.0","id":12,"method":"ping","params":{"a":' + "[" * 100 + "]" * 100 + "}}", 12, -32700,
        "nested deeper than",
    ),
    "params not an object": (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":5}', 1, -32602, "`params` must be an object, got a"
    ),
}  # fmt: skip


def post(url: str, body: str, **headers: str) -> httpx2.Response:
    return httpx2.post(url, content=body, headers={**HEADERS, **headers}, timeout=HANG_GUARD)


def error_of(response: httpx2.Response) -> dict[str, Any]:
    answer: dict[str, Any] = response.json()
    return {"id": answer["id"], **answer["error"]}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_bad_body_gets_a_short_json_rpc_error_and_no_session(url: str, name: str) -> None:
    body, request_id, code, says = BAD_BODIES[name]
    answer = post(url, body)
    assert answer.status_code == 400
    assert "mcp-session-id" not in answer.headers  # no session was opened for it
    error = error_of(answer)
    assert (error["id"], error["code"]) == (request_id, code) and says in error["message"], error
    assert "pydantic" not in error["message"] and len(error["message"]) < 300


def test_inside_a_session_too(url: str) -> None:
    opened = httpx2.post(url, json=initialize(), headers=HEADERS, timeout=HANG_GUARD)
    session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    answer = post(url, BAD_BODIES["batch"][0], **session)
    assert answer.status_code == 400 and error_of(answer)["code"] == -32600
    ping = post(url, '{"jsonrpc":"2.0","id":2,"method":"ping"}', **session)  # the session goes on
    assert ping.status_code == 200 and '"id":2' in ping.text.replace(" ", "")


def test_the_hosts_origins_and_content_type_are_checked_first(url: str) -> None:
    batch = BAD_BODIES["batch"][0]
    assert post(url, batch, Host="evil.example").status_code == 421
    assert post(url, batch, Origin="http://evil.example").status_code == 403
    assert post(url, batch, **{"Content-Type": "text/plain"}).status_code == 400
    assert "Content-Type" in post(url, batch, **{"Content-Type": "text/plain"}).text


def test_good_messages_go_on_to_the_sdk(url: str) -> None:
    opened = httpx2.post(url, json=initialize(), headers=HEADERS, timeout=HANG_GUARD)
    assert opened.status_code == 200 and opened.headers["mcp-session-id"]


def chunks(body: str) -> Iterator[bytes]:
    """`body` sent in pieces with no Content-Length (chunked), so its size is known only as it is read."""
    data = body.encode()
    for at in range(0, len(data), 1000):
        yield data[at : at + 1000]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_gets_413_with_a_json_rpc_error_naming_the_setting(
    url: str, version: str, sized: bool
) -> None:
    # The SDK's own 413 was the plain text "Request body too large": no JSON-RPC error a client could show.
    large = '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":"' + "x" * LIMIT + '"}}'
    headers = {**HEADERS, "mcp-protocol-version": version}
    content: str | Iterator[bytes] = large if sized else chunks(large)
    answer = httpx2.post(url, content=content, headers=headers, timeout=HANG_GUARD)
    assert answer.status_code == 413 and answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"  # the rest of the body is not read to be thrown away
    assert "mcp-session-id" not in answer.headers
    error = error_of(answer)
    size = f"{len(large)} bytes" if sized else f"more than {LIMIT} bytes"
    assert error["code"] == -32600 and error["id"] == (None if sized else 3), error  # the id read from its head
    assert error["message"].startswith(f"message too large: {size}, the limit is {LIMIT} (MCP_TEAM_MAX_MESSAGE_BYTES)")


def test_a_body_over_the_limit_from_a_foreign_origin_is_refused_for_its_origin(url: str) -> None:
    large = '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":"' + "x" * LIMIT + '"}}'
    assert post(url, large, Origin="http://evil.example").status_code == 403


def test_a_2026_client_gets_the_sdks_own_answer(url: str) -> None:
    answer = post(url, BAD_BODIES["batch"][0], **{"mcp-protocol-version": "2026-07-28"})
    assert answer.status_code == 400 and error_of(answer)["code"] == -32600


@pytest.mark.parametrize("version", ["banana", "2027-01-01"])
def test_a_protocol_version_the_server_does_not_speak_is_named(url: str, version: str) -> None:
    # The SDK took any unknown version for 2026-07-28 and answered that the request's _meta envelope was missing.
    answer = post(url, '{"jsonrpc":"2.0","id":6,"method":"ping"}', **{"mcp-protocol-version": version})
    assert answer.status_code == 400 and "mcp-session-id" not in answer.headers
    error = error_of(answer)
    assert (error["id"], error["code"]) == (6, -32022), error
    assert f"unsupported MCP-Protocol-Version '{version}': this server speaks 2024-11-05" in error["message"]
    assert "2026-07-28" in error["message"]
    assert error["data"] == {"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": version}


def test_an_unknown_version_with_a_body_that_is_not_utf8_is_still_a_short_error(url: str) -> None:
    body = b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"\xff"}}'  # it was a 500 and a traceback
    answer = httpx2.post(url, content=body, headers={**HEADERS, "mcp-protocol-version": "banana"}, timeout=HANG_GUARD)
    assert answer.status_code == 400 and error_of(answer)["code"] == -32022, answer.text


WRONG_PARAMS = {
    "a tool name that is not a string": ({"name": 5}, "params.name: Input should be a valid string"),
    "arguments that are not an object": (
        {"name": "run_team", "arguments": 5},
        "params.arguments: Input should be a valid dictionary",
    ),
}


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, sent as JSON or as the last SSE event."""
    text = response.text
    data = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    answer: dict[str, Any] = json.loads(data[-1] if data else text)
    return answer


# On 2026-07-28 a tool name that is not a string is refused first by the routing header check (-32020).
@pytest.mark.parametrize(
    ("revision", "name"),
    [("2025-11-25", name) for name in WRONG_PARAMS] + [("2026-07-28", "arguments that are not an object")],
)
def test_params_that_do_not_fit_the_method_are_named(url: str, revision: str, name: str) -> None:
    """Params that are an object but do not fit `tools/call` are -32602 saying which field is wrong and how (the
    SDK said "Invalid request parameters" with empty data)."""
    params, says = WRONG_PARAMS[name]
    headers = {"mcp-protocol-version": revision}
    if revision == "2025-11-25":
        opened = httpx2.post(url, json=initialize(), headers=HEADERS, timeout=HANG_GUARD)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    else:
        meta = {"io.modelcontextprotocol/protocolVersion": revision, "io.modelcontextprotocol/clientCapabilities": {}}
        params = {**params, "_meta": meta}
        headers |= {"mcp-method": "tools/call", "mcp-name": str(params["name"])}
    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params}
    error = _answer(post(url, json.dumps(call), **headers))["error"]
    assert error["code"] == -32602 and error["message"] == f"invalid params for tools/call: {says}", error


@pytest.mark.parametrize("method", ["ping", "tools/list"])
def test_a_2025_request_without_a_session_is_told_to_initialize_first(url: str, method: str) -> None:
    # The SDK said "Bad Request: Missing session ID" with a null id, and gave the error a session id of a session
    # it had already dropped: a client keeping it got 404s.
    answer = post(
        url, json.dumps({"jsonrpc": "2.0", "id": 8, "method": method}), **{"mcp-protocol-version": "2025-11-25"}
    )
    assert answer.status_code == 400 and "mcp-session-id" not in answer.headers
    error = error_of(answer)
    assert (error["id"], error["code"]) == (8, -32600), error
    assert (
        error["message"].startswith(f"no session: `{method}` needs the Mcp-Session-Id header")
        and "initialize" in (error["message"])
    )


def test_an_sdk_error_to_a_request_without_a_session_carries_no_session_id(url: str) -> None:
    stream = httpx2.get(url, headers={"Accept": "text/event-stream"}, timeout=HANG_GUARD)
    assert stream.status_code == 400 and "mcp-session-id" not in stream.headers
    refused = post(url, json.dumps(initialize()), Accept="text/html")  # not acceptable: the SDK's own answer
    assert refused.status_code == 406 and "mcp-session-id" not in refused.headers
    opened = post(url, json.dumps(initialize()))  # a session that is kept still gets its id
    assert opened.status_code == 200 and opened.headers["mcp-session-id"]
