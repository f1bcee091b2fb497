"""A run's resource changes as the run goes: `team://runs/{id}` tells subscribers when it does.

- 2025-11-25: `resources/subscribe` on a run's URI follows the run (`Runs.subscribe`: changes made here at
  once, those of another process within a second) and sends `notifications/resources/updated` on the
  subscriber's connection until the run has finished, the client unsubscribes or the connection goes.
  Other URIs are refused: nothing would ever be told of them.
- 2026-07-28: every write of a run record publishes `ResourceUpdated` on the server's subscription bus, which
  the SDK delivers to `subscriptions/listen` streams whose filter names that URI. With several replicas
  (PostgreSQL), the runs other replicas write are polled for every second while a stream is open.
Installed on durable servers only: an ephemeral server's runs are not kept, and it declares no subscriptions.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ResourceUpdated

from mcp_team.server.state import ServerState
from mcp_team.server.tasks import visible

if TYPE_CHECKING:
    from mcp_team.runs.store import RunStore

log = logging.getLogger("mcp_team.server")
POLL = 1.0  # seconds between looks for runs other replicas wrote (as `resources/subscribe` follows them)
LOOKBACK = 10.0  # seconds: a replica whose clock is behind ours by less than this is not missed

RUN_URI = re.compile(r"^team://runs/([A-Za-z0-9_.~-]{1,128})$")


def run_uri(run_id: str) -> str:
    return f"team://runs/{run_id}"


def install_run_updates(server: MCPServer[ServerState], state: ServerState) -> None:
    watches: dict[tuple[int, str], anyio.CancelScope] = {}

    async def follow(connection: Any, uri: str, run_id: str, scope: anyio.CancelScope) -> None:
        key = (id(connection), uri)
        try:
            with scope:
                assert state.durability is not None
                runs = await state.durability.service()
                first = True
                async for _record in runs.subscribe(run_id):
                    if not first:  # the first is the run as it was when the client subscribed
                        await connection.send_resource_updated(uri)
                    first = False
        except Exception:  # the connection went away, or the service stopped: nothing left to tell
            pass
        finally:
            if watches.get(key) is scope:
                del watches[key]

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        match = RUN_URI.match(uri)
        if match is None:  # accepted, it would never be told of: say so instead
            raise MCPError(
                types.INVALID_PARAMS,
                f"'{uri}' cannot be subscribed to: only a run's record (team://runs/{{run_id}}) changes as the run "
                "goes; read team://runs again for new runs",
            )
        tg = state.rounds.task_group
        if match is not None and tg is not None and state.durability is not None:
            # Only a run the caller may read: a watch on a run that does not exist (or is another user's) would
            # poll the store every second for as long as the connection lives.
            record = await (await state.durability.service()).get(match.group(1))
            if record is None or not visible(record.owner):
                raise MCPError(types.INVALID_PARAMS, f"no run '{match.group(1)}' on this server (see team://runs)")
            connection = getattr(ctx.session, "_connection", ctx.session)  # lives as long as the client
            key = (id(connection), uri)
            if key not in watches:
                watches[key] = scope = anyio.CancelScope()
                tg.start_soon(follow, connection, uri, match.group(1), scope)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        connection = getattr(ctx.session, "_connection", ctx.session)
        scope = watches.pop((id(connection), str(params.uri)), None)
        if scope is not None:
            scope.cancel()
        return types.EmptyResult()

    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


def publish_updates(state: ServerState, tg: anyio.abc.TaskGroup) -> Any:
    """A run store listener that publishes `ResourceUpdated` for every run written (2026-07-28 streams)."""

    def written(run_ids: list[str]) -> None:
        for run_id in run_ids:
            tg.start_soon(state.bus.publish, ResourceUpdated(uri=run_uri(run_id)))

    return written


async def follow_other_replicas(state: ServerState, store: RunStore) -> None:
    """Publish `ResourceUpdated` for runs written by other processes (replicas on one database), which
    `publish_updates` never hears of; runs changed here may be told twice, which a listener only re-reads."""
    seen: dict[str, float] = {}
    since = time.time()
    while True:
        await anyio.sleep(POLL)
        if not state.bus.listeners:
            seen.clear()
            since = time.time()
            continue
        try:
            changed = await anyio.to_thread.run_sync(store.changed_since, since - LOOKBACK)
        except Exception as exc:  # the database is away: the next poll tries again
            log.debug("could not look for runs changed elsewhere: %s", exc)
            continue
        for run_id, stamp in changed:
            if seen.get(run_id) != stamp:
                seen[run_id] = stamp
                await state.bus.publish(ResourceUpdated(uri=run_uri(run_id)))
        since = max([since, *(stamp for _, stamp in changed)])
        seen = {run_id: stamp for run_id, stamp in seen.items() if stamp > since - LOOKBACK}
