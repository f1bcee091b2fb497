"""MCP over stdio that answers every line: the SDK's stdio transport behind a gate that checks each line first.

The SDK's stdio reader turns a line that is not a JSON-RPC message into an exception the session drops, so a
client that sent garbage, invalid JSON, `"params": "x"` or JSON nested thousands deep waits forever for an
answer. Here each line is checked before the SDK sees it, and a bad one is answered at once, as JSON-RPC says:

`messages.check_message` says what is wrong with a bad one (too large, not JSON, no JSON-RPC message).

Good lines go on to the SDK unchanged. Hand-written because the SDK has no hook between reading a line and
parsing it; it reuses the SDK's `stdio_server` for everything else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from io import TextIOWrapper
from typing import Any, BinaryIO

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.server.transports.messages import check_message

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the SDK's limit for an HTTP body, so both transports agree


async def serve_stdio(server: MCPServer[Any], *, limit: int | None = None) -> None:
    """Serve `server` on this process's stdin and stdout until stdin closes; a message over `limit` bytes
    (default `DEFAULT_MAX_MESSAGE_BYTES`) is refused."""
    limit = limit or DEFAULT_MAX_MESSAGE_BYTES
    lowlevel = lowlevel_of(server)  # what MCPServer.run_stdio_async runs, too
    with _claimed_stdio() as (stdin_bytes, stdout_bytes):
        stdout = _LineWriter(anyio.wrap_file(TextIOWrapper(stdout_bytes, encoding="utf-8")))
        stdin = anyio.wrap_file(TextIOWrapper(stdin_bytes, encoding="utf-8", errors="replace"))
        async with stdio_server(stdin=_checked_lines(stdin, stdout, limit), stdout=stdout) as (read, write):  # type: ignore[arg-type]
            await lowlevel.run(read, write, lowlevel.create_initialization_options())


class _LineWriter:
    """Stdout shared by the SDK's writer and the gate: one whole line at a time."""

    def __init__(self, file: anyio.AsyncFile[str]) -> None:
        self._file = file
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text)
            await self._file.flush()

    async def flush(self) -> None:
        pass  # every write is flushed under the lock

    async def error(self, request_id: Any, code: int, message: str) -> None:
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        await self.write(json.dumps(error, separators=(",", ":")) + "\n")


async def _checked_lines(stdin: anyio.AsyncFile[str], out: _LineWriter, limit: int) -> AsyncIterator[str]:
    async for line in stdin:
        if not line.strip():
            continue
        problem = check_message(line, limit)
        if problem is None:
            yield line
        else:
            await out.error(*problem)


@contextmanager
def _claimed_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """Private copies of fds 0 and 1 for the protocol; while serving, fd 0 reads the null device and fd 1 goes
    to stderr, so a stray print or a child process never writes into the protocol stream."""
    sys.stdout.flush()
    stdin_fd, stdout_fd = os.dup(0), os.dup(1)
    saved = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        # closefd=False: the SDK reads stdin in a worker thread that can outlive the transport.
        yield os.fdopen(stdin_fd, "rb", closefd=False), os.fdopen(stdout_fd, "wb", closefd=False)
    finally:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        for fd in saved:
            os.close(fd)
