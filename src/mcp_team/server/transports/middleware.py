"""What the server adds around the SDK's request handling: remembering 2025-era sessions, redacting tool
results, exporting spans after tool calls, and advertising `listChanged` at `initialize`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer

from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.server.state import ServerState
from mcp_team.telemetry.content import redact_value

if TYPE_CHECKING:
    from mcp_team.telemetry.setup import Tracing


def remember_session(state: ServerState) -> ServerMiddleware[Any]:
    """Middleware that keeps the 2025-era connections, which get list-changed notifications on reload."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.protocol_version and ctx.protocol_version < "2026":
            # The session object is made per request; its connection is what lives as long as the client
            # and can send on the standalone channel. The SDK exposes it to middleware only privately.
            state.sessions.add(getattr(ctx.session, "_connection", ctx.session))
        try:
            return await call_next(ctx)
        finally:
            state.runs.want()  # the first request is answered: durable runs may open now

    return middleware


def redact_tool_results() -> ServerMiddleware[Any]:
    """Middleware: every tool result is redacted like the stored run records and spans (registered secrets,
    e.g. an external MCP server's env, and well-known key shapes), whatever tool made it, before it is sent."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, dict):
            return result
        # Only what the tool said: an input_required round's requestState is sealed and must come back as sent.
        return {k: redact_value(v) if k in ("content", "structuredContent") else v for k, v in result.items()}

    return middleware


def flush_after_calls(state: ServerState, tracing: Tracing) -> ServerMiddleware[Any]:
    """Middleware: after each tool call, export its spans, so a client closing the server loses none.
    The export runs in the background (in the lifespan's task group): an absent collector never delays a
    reply, and at most one export is pending at a time."""
    pending = False

    async def flush() -> None:
        nonlocal pending
        try:
            await anyio.to_thread.run_sync(tracing.flush)
        finally:
            pending = False

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        nonlocal pending
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call" and not pending and state.rounds.task_group is not None:
                pending = True
                state.rounds.task_group.start_soon(flush)

    return middleware


def advertise_list_changed(server: MCPServer[ServerState]) -> None:
    """Advertise `listChanged` for tools and prompts to 2025-era clients (the SDK's default is off).

    `MCPServer` has no public switch for this; its transports all build their initialization
    options through the low-level server, so that is where the default changes.
    """
    lowlevel = lowlevel_of(server)
    create = lowlevel.create_initialization_options

    def with_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kw: Any) -> Any:
        return create(
            notification_options or NotificationOptions(prompts_changed=True, tools_changed=True), *args, **kw
        )

    lowlevel.create_initialization_options = with_list_changed  # type: ignore[method-assign]
