"""Tools from other MCP servers: a pool of live sessions (`McpToolPool`); their configuration is in `mcp_config`.

This module owns the connections to external MCP servers a team file names, and turns their tools into
specialist `Tool`s. It imports the MCP SDK: `TeamSpec.mcp_pool` imports it only for a team that names a server.

* Lifetime: `async with McpToolPool(configs) as pool:` starts every server concurrently, each under a start
  timeout, and keeps one `mcp.Client` session per server open until the block ends. Each session lives in
  its own task (the SDK's transports must be entered and left in one task), which also isolates failures.
* Failures never fail the pool. A server that cannot start (command not found, exited, timed out, initialize
  failed, connection refused) is recorded in `pool.status()`, and its tools raise `ToolFailed` with that
  reason when called. A server that dies mid-run (the client raises "Connection closed", or its transport
  breaks) is marked dead at the first failing call; its tools then fail fast with "MCP server 'x' is not
  available: <reason>" and the rest of the team keeps working. A server that dies while idle still reads
  "running" until a call notices.
* Exit is bounded: each session gets `stop_timeout` seconds to close (the stdio transport itself closes
  stdin, then terminates and kills the process, all bounded), and a server that died or fails to close
  is logged, never raised.
* Tool names: a wrapped tool is named after the remote tool, optionally with the config's `tool_prefix`
  (e.g. `tool_prefix="gh_"` turns `search` into `gh_search`) to avoid collisions between servers. Model APIs
  accept only `[A-Za-z0-9_-]{1,64}`, so other characters become `_` and long names are cut; the remote call
  always uses the original name. Not `server.tool`: the dot is not a valid tool-name character for them.
* A stdio server's stderr goes to a temporary file (deleted when the pool closes), so a start or crash
  error can quote its last lines. It is not rotated: a server that logs heavily for a long run grows it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TextIO, cast

import anyio
import anyio.to_thread
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED
from pydantic import ValidationError

from mcp_team.specialists.mcp_config import McpServerConfig, local_name
from mcp_team.specialists.tools import Tool, ToolFailed

logger = logging.getLogger(__name__)

_STDERR_TAIL = 600
_MAX_LIST_PAGES = 50


@dataclass(eq=False)
class _Server:
    config: McpServerConfig
    settled: anyio.Event = field(default_factory=anyio.Event)
    client: Client | None = None
    remote_tools: dict[str, mcp_types.Tool] = field(default_factory=dict)
    error: str | None = None
    stderr: TextIO | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def status(self) -> str:
        if self.error is not None:
            return self.error
        if self.client is not None:
            return "running"
        return "stopped" if self.settled.is_set() else "not started"

    def unavailable(self, reason: str | None = None) -> ToolFailed:
        return ToolFailed(f"MCP server '{self.name}' is not available: {reason or self.status()}")

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr (read without moving the shared file offset)."""
        if self.stderr is None:
            return ""
        try:
            fd = self.stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - _STDERR_TAIL)
            tail = os.pread(fd, size - start, start).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        lines = [line for line in tail.splitlines() if line.strip()]
        if start > 0 and lines:
            lines = lines[1:]  # the first line is probably cut
        return " | ".join(line.strip() for line in lines[-5:])

    async def mark_dead(self, reason: str) -> str:
        """Record the first reason the server became unavailable (with its stderr's last lines); return it."""
        if self.error is None:
            self.error = reason  # before any await: concurrent callers keep the first reason
            tail = await anyio.to_thread.run_sync(self.stderr_tail)
            if tail:
                self.error = f"{reason}; its stderr ends: {tail}"
            logger.warning("MCP server %r is not available: %s", self.name, self.error)
        return self.error


class McpToolPool:
    """The live sessions to a team's external MCP servers; `tools()` wraps their tools for specialists."""

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        *,
        start_timeout: float = 30.0,
        stop_timeout: float = 5.0,
    ) -> None:
        names = [c.name for c in configs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"MCP server names must be unique; repeated: {', '.join(duplicates)}")
        self._servers = {c.name: _Server(c) for c in configs}
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._closing = anyio.Event()
        self._stack: AsyncExitStack | None = None

    # --- lifetime ------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("an McpToolPool can be entered only once")
        stack = self._stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._closing.set)  # runs first on exit: tell every session to close
            for server in self._servers.values():
                tg.start_soon(self._serve, server, name=f"mcp server {server.name}")
            for server in self._servers.values():
                await server.settled.wait()  # each is bounded by start_timeout
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._stack is not None:
            await self._stack.__aexit__(exc_type, exc, tb)

    async def _serve(self, server: _Server) -> None:
        """Run one server's session for the pool's lifetime; record, never raise, what goes wrong."""
        started = False
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout)
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(server, stack)
                    server.remote_tools = await _list_tools(client)
                    started = True
                    scope.deadline = math.inf
                    server.client = client
                    server.settled.set()
                    await self._closing.wait()
                    scope.deadline = anyio.current_time() + self.stop_timeout  # bound the close
            if scope.cancelled_caught:
                if started:
                    logger.warning("MCP server %r did not close within %g s", server.name, self.stop_timeout)
                else:
                    await server.mark_dead(f"did not start within {self.start_timeout:g} s")
        except Exception as exc:  # one broken server must not break the pool
            if not started:
                timed_out = scope.cancel_called and not self._closing.is_set()
                reason = f"did not start within {self.start_timeout:g} s" if timed_out else _start_error(server, exc)
                await server.mark_dead(reason)
            elif not self._closing.is_set():
                await server.mark_dead(f"its session ended: {_describe(exc)}")
            else:
                logger.info("MCP server %r closed with an error: %s", server.name, _describe(exc))
        finally:
            server.client = None
            server.settled.set()
            if server.stderr is not None:
                server.stderr.close()

    async def _connect(self, server: _Server, stack: AsyncExitStack) -> Client:
        config = server.config
        if config.url is not None:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=config.headers, timeout=httpx2.Timeout(30.0, read=300.0))
            )
            transport = streamable_http_client(config.url, http_client=http)
        else:
            assert config.command is not None
            server.stderr = await anyio.to_thread.run_sync(_temporary_file)
            params = StdioServerParameters(command=config.command, args=config.args, env=config.env or None)
            transport = stdio_client(params, errlog=server.stderr)
        return await stack.enter_async_context(Client(transport))

    # --- queries -------------------------------------------------------------------------------------------------

    def status(self) -> dict[str, str]:
        """Each server's state: "running", or why it is not."""
        return {name: server.status() for name, server in self._servers.items()}

    def tools(self, server: str, names: Sequence[str] | None = None) -> list[Tool]:
        """Tools for `names` (remote names; None: all the server offers), restricted to its `allowed_tools`.

        A server that is not running still yields the tools it was granted by name, which raise `ToolFailed`
        with its error when called. Unknown servers, and names the server does not offer or the config does
        not allow, raise `ValueError`: those are mistakes in the team file.
        """
        entry = self._servers.get(server)
        if entry is None:
            known = ", ".join(self._servers) or "none"
            raise ValueError(f"unknown MCP server '{server}'; the configured servers are: {known}")
        allowed = entry.config.allowed_tools
        if names is not None:
            refused = [n for n in names if allowed is not None and n not in allowed]
            if refused:
                raise ValueError(
                    f"MCP server '{server}' does not allow {', '.join(refused)}; its allowed_tools are: "
                    + ", ".join(allowed or [])
                )
        if entry.client is None:  # failed to start (or not started): the failure shows at call time
            granted = list(names) if names is not None else list(allowed or [])
            return [self._stub(entry, n) for n in dict.fromkeys(granted)]
        offered = [n for n in entry.remote_tools if allowed is None or n in allowed]
        if names is None:
            return [self._wrap(entry, entry.remote_tools[n]) for n in offered]
        missing = [n for n in names if n not in entry.remote_tools]
        if missing:
            raise ValueError(
                f"MCP server '{server}' has no tool {', '.join(missing)}; it offers: {', '.join(offered) or 'none'}"
            )
        return [self._wrap(entry, entry.remote_tools[n]) for n in dict.fromkeys(names)]

    # --- the wrapped tools ---------------------------------------------------------------------------------------

    def _wrap(self, server: _Server, remote: mcp_types.Tool) -> Tool:
        schema = dict(remote.input_schema)
        schema.setdefault("type", "object")

        async def run(args: dict[str, Any]) -> str:
            return await self._call(server, remote.name, args)

        description = remote.description or remote.title or f"The '{remote.name}' tool of MCP server '{server.name}'."
        said = remote.annotations or mcp_types.ToolAnnotations()  # the server's word; MCP's defaults where silent
        return Tool(
            name=local_name(server.config, remote.name),
            description=description,
            input_schema=schema,
            run=run,
            read_only=said.read_only_hint is True,
            destructive=said.destructive_hint is not False,
        )  # a longer result or error is cut by the loop, at the tool's max_result_chars (a team file's [tools])

    def _stub(self, server: _Server, remote_name: str) -> Tool:
        async def run(args: dict[str, Any]) -> str:
            raise server.unavailable()

        return Tool(
            name=local_name(server.config, remote_name),
            description=f"The '{remote_name}' tool of MCP server '{server.name}' (not available: {server.status()}).",
            input_schema={"type": "object"},
            run=run,
        )

    async def _call(self, server: _Server, name: str, args: dict[str, Any]) -> str:
        client = server.client
        if client is None or server.error is not None:
            raise server.unavailable()
        if self._closing.is_set():
            raise server.unavailable("the team is shutting down")
        try:
            result = await client.call_tool(name, args)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED and not self._closing.is_set():
                lost = "the connection was lost" + (
                    "; its process has probably exited" if server.config.command else ""
                )
                raise server.unavailable(await server.mark_dead(lost)) from None
            if exc.code == CONNECTION_CLOSED:
                raise server.unavailable("the team is shutting down") from None
            raise ToolFailed(f"MCP server '{server.name}' rejected the call to {name}: {exc.message}") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError) as exc:
            raise server.unavailable(await server.mark_dead(_describe(exc))) from None
        except httpx2.TransportError as exc:
            raise server.unavailable(await server.mark_dead(_describe(exc))) from None
        except ValidationError as exc:
            raise ToolFailed(f"MCP server '{server.name}' sent an invalid result for {name}: {exc}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolFailed(f"MCP server '{server.name}': {text or f'{name} failed without a message'}")
        return text


def result_text(result: mcp_types.CallToolResult) -> str:
    """A tool result as text: text blocks joined, other blocks summarized; structured content if no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'})]")
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            parts.append(f"[{block.type} ({block.mime_type}) not shown]")
    text = "\n".join(parts)
    if not text.strip() and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return text


async def _list_tools(client: Client) -> dict[str, mcp_types.Tool]:
    tools: dict[str, mcp_types.Tool] = {}
    cursor: str | None = None
    for _ in range(_MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.update((t.name, t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _temporary_file() -> TextIO:
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = next((e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())), exc.exceptions[0])
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _start_error(server: _Server, exc: BaseException) -> str:
    """Why a server did not start, in words a team-file author can act on."""
    config = server.config
    leaf = _leaf(exc)
    if isinstance(leaf, FileNotFoundError) and config.command is not None:
        return f"command not found: {config.command}"
    if isinstance(leaf, PermissionError) and config.command is not None:
        return f"cannot run {config.command}: permission denied"
    if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        what = "exited" if config.command is not None else "closed the connection"
        return f"the server {what} before it finished starting ({config.target})"
    if isinstance(leaf, MCPError):
        return f"initialize failed: {leaf.message}"
    if isinstance(leaf, httpx2.TransportError):
        return f"cannot connect to {config.url}: {_describe(leaf)}"
    if isinstance(leaf, OSError) and config.command is not None:
        return f"cannot start {config.command}: {leaf.strerror or leaf}"
    return f"failed to start: {_describe(leaf)}"
