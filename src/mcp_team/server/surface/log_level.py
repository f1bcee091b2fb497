"""Log messages to the client (`notifications/message`), never below the level it asked for.

Two revisions, two ways of asking:
- 2025-11-25: the client sends `logging/setLevel` once; the level holds for its connection. Registering the
  handler is also what makes the SDK declare the `logging` capability at `initialize`. Before any
  `setLevel` the server sends what it judges useful (the spec leaves it to the server): warnings and above.
- 2026-07-28: each request opts in with `io.modelcontextprotocol/logLevel` in its `_meta` (no opt-in, no
  messages); the SDK applies that gate itself, and `logging/setLevel` no longer exists on this revision.
"""

from __future__ import annotations

import warnings
from typing import Any, Final, get_args

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context

LEVELS: Final[tuple[types.LoggingLevel, ...]] = get_args(types.LoggingLevel)  # least severe first
DEFAULT_LEVEL: Final[types.LoggingLevel] = "warning"
_STATE_KEY: Final = "mcp_team.log_level"


def _connection(session: Any) -> Any:
    # The session object is made per request; its connection lives as long as the client. The SDK exposes the
    # connection to handlers only privately (see middleware.remember_session).
    return getattr(session, "_connection", session)


def install_set_level(server: Server[Any]) -> None:
    """Handle `logging/setLevel` (2025-era clients): remember the level for the client's connection."""

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        state = getattr(_connection(ctx.session), "state", None)
        if isinstance(state, dict):
            state[_STATE_KEY] = params.level
        return types.EmptyResult()

    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)


def level_of(ctx: Context[Any, Any]) -> types.LoggingLevel:
    """The least severe level this request's client wants (2025-era: its `setLevel`, else the default)."""
    state = getattr(_connection(ctx.session), "state", None)
    level = state.get(_STATE_KEY) if isinstance(state, dict) else None
    return level if level in LEVELS else DEFAULT_LEVEL


async def send_log(ctx: Context[Any, Any], level: types.LoggingLevel, message: str) -> None:
    """Send `message` at `level` on `ctx`'s request, if the client asked for that level or a lower one.

    On 2026-07-28 the SDK drops it unless the request opted in at `level` or below; on 2025-11-25 this checks
    the connection's `setLevel`."""
    legacy = (ctx.protocol_version or "") < "2026"
    if legacy and LEVELS.index(level) < LEVELS.index(level_of(ctx)):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # protocol logging is deprecated on 2026-07-28 but still honoured
        await ctx.log(level, message)
