"""What the fake model APIs (Messages, Chat Completions) share: a JSON route on 127.0.0.1 that records
every request and answers with scripted replies first, then with the subclass's `answer`.

A subclass sets `route`, `name` and `request_id_header`, formats its API's error bodies
(`error_reply`) and answers from its brain (`answer`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, Self

import anyio

from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.types import ModelRequest, ModelResponse
from support import HANG_GUARD
from support.local_http import LocalHTTPServer

_ids = itertools.count(1)


@dataclass
class Reply:
    """One reply; `delay` seconds pass before it is sent (for timeout tests). A `bytes` body is sent as it is,
    labelled JSON unless `headers` say otherwise (for servers that answer 200 with something that is not)."""

    status: int
    body: dict[str, Any] | bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class FakeJSONAPI:
    """A JSON API on an ephemeral port of 127.0.0.1, run in a daemon thread.

    Records every request body (`requests`) and its headers (`request_headers`, lower-cased names).
    """

    route = "/"
    name = "fake-api"
    request_id_header = "request-id"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self._http = LocalHTTPServer(type("Handler", (_Handler,), {"api": self}), self.name)

    # -- what a subclass provides --

    def answer(self, body: dict[str, Any]) -> Reply:
        """The reply to a request when no scripted one is left."""
        raise NotImplementedError

    def error_reply(self, status: int, message: str) -> Reply:
        """An error in the API's own shape."""
        raise NotImplementedError

    # -- scripting --

    def reply(
        self, status: int, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None, *, delay: float = 0.0
    ) -> None:
        """Queue one reply."""
        with self._lock:
            self._replies.append(Reply(status, body, dict(headers or {}), delay))

    @property
    def pending(self) -> int:
        """Scripted replies not served yet."""
        with self._lock:
            return len(self._replies)

    def next_scripted(self) -> Reply | None:
        with self._lock:
            return self._replies.pop(0) if self._replies else None

    # -- lifecycle --

    @property
    def url(self) -> str:
        return self._http.url

    def __enter__(self) -> Self:
        self._http.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._http.stop()

    def get(self, path: str) -> Reply:
        """A GET request's reply (e.g. a model listing); none by default."""
        return self.error_reply(404, f"{type(self).__name__}: no route GET {path}")

    # -- serving (called from the server's threads) --

    def _serve(self, path: str, raw: bytes, headers: dict[str, str]) -> Reply:
        if path.split("?")[0].rstrip("/") != self.route:
            return self.error_reply(404, f"{type(self).__name__}: no route {path}")
        try:
            body = json.loads(raw)
        except ValueError:
            return self.error_reply(400, f"{type(self).__name__}: body is not JSON")
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
        return self.next_scripted() or self.answer(body)


class _Handler(BaseHTTPRequestHandler):
    api: FakeJSONAPI
    # Connections kept open between requests, as every real API and llama.cpp's server keep them: an SDK client
    # reuses them, and a client whose connections outlived their event loop failed its next call there.
    protocol_version = "HTTP/1.1"
    # A reply goes out in several writes; on a kept connection Nagle's algorithm held each next one for the
    # client's delayed ACK (~40 ms a call), as real servers' TCP_NODELAY does not.
    disable_nagle_algorithm = True

    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a client dropped a kept connection
            super().handle()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(self.api._serve(self.path, raw, {k.lower(): v for k, v in self.headers.items()}))

    def do_GET(self) -> None:
        self._send(self.api.get(self.path))

    def _send(self, reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            # A reply's own content-type (e.g. text/html, as a web server at the wrong URL) replaces JSON's.
            if "content-type" not in {name.lower() for name in reply.headers}:
                self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header(self.api.request_id_header, f"req_fake_{next(_ids)}")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet


def offline_brain(request: ModelRequest) -> ModelResponse:
    """A fake API's "model": the offline backend reading what came over the wire."""
    return anyio.run(OfflineModel().complete, request)


class Stalling:
    """A fake API's brain: the offline model, except that the calls `held` picks are held until `release` (sent,
    and never answered while the test runs); `arrived` is set when one comes. Leaving it (`with`) releases them,
    so the server's request threads can end."""

    def __init__(self, held: Callable[[ModelRequest], bool]) -> None:
        self.held = held
        self.arrived, self.release = threading.Event(), threading.Event()

    def __call__(self, request: ModelRequest) -> ModelResponse:
        if self.held(request):
            self.arrived.set()
            self.release.wait(HANG_GUARD)
        return offline_brain(request)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
