"""One JSON-RPC message, checked before the SDK parses it: each stdio line (`stdio`), and each POST body over HTTP
(`check_http_bodies`: its size for every client, the message itself for a 2025-era one).

A bad one is answered at once, as JSON-RPC says:
- larger than the message limit: -32600, naming the size and the limit (`MCP_TEAM_MAX_MESSAGE_BYTES`), over
  HTTP with status 413;
- not JSON, or nested deeper than `MAX_DEPTH`: -32700 (parse error);
- JSON but not a JSON-RPC message (a batch, a non-object, a request whose `params` is not an object, a bad
  `id` or `method`): -32600 or -32602 with the request's id when it has a usable one;
- over HTTP, a 2025-era request with no session other than `initialize`: 400, -32600 saying to initialize first
  (and no error answer to a request that named no session carries a session id: the SDK's did, of a session it
  had dropped).

Over HTTP the SDK's 2025 path answered a batch, or JSON that is no JSON-RPC message, with -32602 and pydantic's
whole report, after opening a session for it whose id the error carried (the session was then dropped); its
2026 path already answers -32600 in a line, and gets the body as it is. Hand-written: the SDK has no hook
between reading a message and parsing it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

MAX_DEPTH = 64  # deeper JSON is no MCP message, and parsing it recursively could exhaust the stack

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def check_http_bodies(manager: StreamableHTTPSessionManager, security: TransportSecuritySettings, limit: int) -> None:
    """Check each POST body before `manager` sees it, after the Host, Origin and Content-Type checks the SDK
    would make: one over `limit` (any protocol revision) gets 413 with a JSON-RPC error naming the limit and its
    setting (the SDK's 413 is the plain text "Request body too large", which a client cannot show as an error
    of its request); a 2025-era client's is checked whole (`check_message`) and, when it names no session, must be
    an `initialize`."""
    inner = manager.asgi_app  # the manager's entry, behind the route's auth; private in SDK 2.3
    guard = TransportSecurityMiddleware(security)

    async def answer(scope: Scope, receive: Receive, send: Send, status: int, error: dict[str, Any], at: Any) -> None:
        refused = await guard.validate_request(Request(scope), is_post=True)
        body = {"jsonrpc": "2.0", "id": at, "error": error}
        # After a 413 the rest of the body is never read: closing the connection spares reading it to throw it away.
        headers = {"connection": "close"} if status == 413 else None
        await (refused or JSONResponse(body, status_code=status, headers=headers))(scope, receive, send)

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        sessionless = b"mcp-session-id" not in headers
        if sessionless:
            send = _no_session_on_errors(send)
        if scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        declared = _declared_size(headers.get(b"content-length"))
        if declared is not None and declared > limit:  # refused unread, as the SDK does
            error = {"code": INVALID_REQUEST, "message": too_large(f"{declared} bytes", limit)}
            await answer(scope, receive, send, 413, error, None)
            return
        read: list[Message] = []
        size, more = 0, True
        while more and size <= limit:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            more = message.get("more_body", False)

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        body = b"".join(m.get("body", b"") for m in read)
        if size > limit:  # the rest is never read: the answer names what was
            error = {"code": INVALID_REQUEST, "message": too_large(f"more than {limit} bytes", limit)}
            # The id when the head holds it (the Python SDK writes it first); the TypeScript SDK's, last, is unread.
            await answer(scope, replay, send, 413, error, _outer_id(body[:512]))
            return
        header = headers.get(b"mcp-protocol-version")
        version = header.decode("latin-1") if header is not None else None
        unknown = version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS and not unknown
        if not modern and not more and read[-1]["type"] == "http.request":
            problem = check_message(body, limit)
            data: dict[str, Any] | None = None
            decoded = body.decode("utf-8", "replace")  # as `check_message` read it (an object, when it passed)
            if problem is None and unknown and not _has_envelope(message := json.loads(decoded)):
                # A request of the handshake era with a version the server does not know: the SDK took it for the
                # 2026 revision and said its envelope was missing. (One with the envelope gets the SDK's answer.)
                supported = ", ".join(SUPPORTED_PROTOCOL_VERSIONS)
                text = f"unsupported MCP-Protocol-Version '{version}': this server speaks {supported}"
                problem = (message.get("id"), UNSUPPORTED_PROTOCOL_VERSION, text)
                data = {"supported": list(SUPPORTED_PROTOCOL_VERSIONS), "requested": version}
            elif problem is None and sessionless and not unknown:
                problem = _needs_session(json.loads(decoded))
            if problem is not None:
                request_id, code, text = problem
                error = {"code": code, "message": text, **({"data": data} if data else {})}
                await answer(scope, replay, send, 400, error, request_id)
                return
        await inner(scope, replay, send)

    manager.asgi_app = checked  # type: ignore[assignment]


def _no_session_on_errors(send: Send) -> Send:
    """`send`, minus the session id the SDK puts on its error answers to a request that named no session: it made
    a session for the request, refused the request, and dropped the session; a client keeping that id would get
    404s."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            message = {**message, "headers": [h for h in message.get("headers", ()) if h[0] != b"mcp-session-id"]}
        await send(message)

    return sending


def _needs_session(message: dict[str, Any]) -> tuple[Any, int, str] | None:
    """The answer to a 2025-era message sent with no session, other than `initialize` (the SDK said "Bad Request:
    Missing session ID", with a null id); None for `initialize`, and for a response, which has no method."""
    method = message.get("method")
    if method is None or method == "initialize":
        return None
    return (
        _usable_id(message.get("id")),
        INVALID_REQUEST,
        f"no session: `{method}` needs the Mcp-Session-Id header on protocol 2025-11-25 and earlier; send "
        "`initialize` first and pass back the Mcp-Session-Id it answers with",
    )


def _usable_id(request_id: object) -> str | int | None:
    """A JSON-RPC request id to answer with: a string or an integer (not a boolean), else None."""
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _declared_size(header: bytes | None) -> int | None:
    try:
        return int(header) if header is not None else None
    except ValueError:  # not a number: the server reads the body, and its size is checked as it comes
        return None


def too_large(size: str, limit: int) -> str:
    """The message for a JSON-RPC message over the limit, `size` saying how large it is."""
    return (
        f"message too large: {size}, the limit is {limit} (MCP_TEAM_MAX_MESSAGE_BYTES); send less text, e.g. a "
        "shorter request or context"
    )


def _has_envelope(message: dict[str, Any]) -> bool:
    """Whether a request carries the 2026-07-28 per-request envelope (its protocol version in `_meta`)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta


def check_message(text: str | bytes, limit: int) -> tuple[Any, int, str] | None:
    """None for a message the SDK can take, else the answer to it: (id, code, message)."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", errors="replace"))
    if size > limit:
        return (
            _outer_id(text),
            INVALID_REQUEST,
            too_large(f"{size} bytes", limit),
        )
    line = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    if line.count("[") + line.count("{") > MAX_DEPTH and _depth(line) > MAX_DEPTH:
        # The id when it came before the nesting (as `_outer_id` finds it): a client waiting on it is answered.
        return _outer_id(line), PARSE_ERROR, f"parse error: JSON nested deeper than {MAX_DEPTH} levels"
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return None, PARSE_ERROR, f"parse error: not JSON ({exc})"
    if isinstance(message, list):
        return None, INVALID_REQUEST, "invalid request: JSON-RPC batches are not supported by MCP; send one message"
    if not isinstance(message, dict):
        return None, INVALID_REQUEST, "invalid request: a JSON-RPC message is a JSON object"
    request_id = message.get("id")
    usable_id = _usable_id(request_id)
    if "method" in message and "id" in message and usable_id is None:
        # The SDK would take it for a notification and never answer: a client waiting on it would wait forever.
        return None, INVALID_REQUEST, f"invalid request: `id` must be a string or an integer, got {_kind(request_id)}"
    if "method" in message and "params" in message and not isinstance(message["params"], dict):
        if usable_id is None:
            return None, INVALID_REQUEST, "invalid request: `params` must be an object"
        return usable_id, INVALID_PARAMS, f"invalid params: `params` must be an object, got {_kind(message['params'])}"
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or 'message'}: {e['msg']}" for e in exc.errors()[:3])
        return usable_id, INVALID_REQUEST, f"invalid request: not a JSON-RPC 2.0 message ({problems})"
    return None


# A top-level `id` found without parsing an oversized message: first after simple members (the Python SDK writes
# `{"jsonrpc":"2.0","id":...`), or last (the TypeScript SDK writes `...,"id":7}`). Anchored at either end of the
# object, so an `id` inside `params` never matches; any other place gets a null id.
_ID = r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")(?=\s*[,}])'
_ID_FIRST = re.compile(r'\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,200}"\s*,)*\s*' + _ID)
_ID_LAST = re.compile(_ID + r"\s*\}\s*\Z")


def _outer_id(text: str | bytes) -> Any:
    """The id of an oversized message, read from its first and last bytes only, or None."""
    head, tail = text[:512], text[-512:]
    if isinstance(text, bytes):
        head, tail = head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")  # type: ignore[union-attr]
    match = _ID_FIRST.match(head) or _ID_LAST.search(tail)  # type: ignore[arg-type]
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def _depth(text: str) -> int:
    """How deep brackets nest, outside strings; a linear scan, so hostile input costs no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _kind(value: Any) -> str:
    kinds = {str: "a string", list: "an array", dict: "an object", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
