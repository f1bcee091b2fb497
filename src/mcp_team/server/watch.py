"""The team-file watcher: an edit reloads the team and tells clients; a broken edit keeps the current team."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import anyio
from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer

from mcp_team.errors import ConfigError
from mcp_team.server.registry import apply_team
from mcp_team.server.state import ServerState
from mcp_team.teamfile.loading import load_team_file
from mcp_team.telemetry.content import register_secret

log = logging.getLogger("mcp_team.server")
news = logging.getLogger("mcp_team.server.watch")  # a reload that worked: INFO, shown on stderr (cli/common.py)

WATCH_INTERVAL = 0.5


async def watch_team_file(
    server: MCPServer[ServerState], state: ServerState, path: Path, task_group: TaskGroup, scope: anyio.CancelScope
) -> None:
    """Reload the team when its file changes, until `scope` is cancelled; a broken edit keeps the current
    team and logs why."""
    with scope:
        await _watch_loop(server, state, path, task_group)


async def _watch_loop(server: MCPServer[ServerState], state: ServerState, path: Path, task_group: TaskGroup) -> None:
    last = _mtime(path)
    while True:
        await anyio.sleep(WATCH_INTERVAL)
        current = _mtime(path)
        if current == last:
            continue
        last = current
        try:
            team = replace(load_team_file(path), overrides=state.team.overrides)  # the command line's still apply
        except ConfigError as exc:
            log.error("%s\nkeeping the current team", exc)
            continue
        for secret in team.secrets():
            register_secret(secret)
        try:
            await apply_team(server, state, team, task_group)
        except ConfigError as exc:
            log.error("cannot apply %s: %s; keeping the current team", path, exc)
            continue
        news.info("reloaded the team from %s: %s", path, ", ".join(s.name for s in state.specialists))
        await state.announce_change()


def _mtime(path: Path) -> tuple[int, int] | None:
    """What tells an edit: modification time and size (a same-tick rewrite still changes one of them
    in practice)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
