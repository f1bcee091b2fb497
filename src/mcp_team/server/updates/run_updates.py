"""The runs' resources change as runs go, and their subscribers are told.

- `team://runs/{id}`, a run's record:
  - 2025-11-25: `resources/subscribe` on it follows the run (`Runs.subscribe`: changes made here at once, those of
    another process within a second) and sends `notifications/resources/updated` on the subscriber's connection
    until the run has finished, the client unsubscribes or the connection ends.
  - 2026-07-28: every write of a run record publishes `ResourceUpdated` on the server's subscription bus, which the
    SDK delivers to `subscriptions/listen` streams whose filter names that URI, of those who may see the run
    (`publish_to`: another user's stream naming it is told nothing, not even when it changes). The runs other
    processes write (replicas on PostgreSQL; `mcp-team run` on this SQLite state directory), which no write here
    tells of, are polled for every second while a stream is open.
- `team://runs`, the listing (every server): `resources/subscribe` on it (2025-11-25) or a `subscriptions/listen`
  stream naming it (2026-07-28) follows it; see listing_updates.py.
Other URIs are refused, and so is a run the caller may not read, which is told of as one that does not exist
(`refusal`): nothing would ever be told of them. On 2026-07-28 they are left
out of the listen stream's acknowledgment, or the listen refused when nothing else was asked for
(`refuse_in_listen_filters`); so is a listen naming more than `MAX_LISTEN_URIS` URIs (each run's costs a read).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import ResourceUpdated

from mcp_team.server.auth import caller, visible
from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.server.state import ServerState
from mcp_team.server.updates.listing_updates import (
    LIST_URI,
    LOOKBACK,
    POLL,
    ListingFollowers,
    follow_listen_streams,
    sees,
)

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs
    from mcp_team.runs.store import RunStore  # the runs database of a durable server

log = logging.getLogger("mcp_team.server")
CLOSE_HOOK = "mcp_team.run_updates"  # the mark, in a connection's scratch state, that its end forgets its watches

RUN_URI = re.compile(r"^team://runs/([A-Za-z0-9_.~-]{1,128})$")
# URIs one listen filter may name: each run's is read from the store before the stream is acknowledged, and a 4 MiB
# request holds some 30,000. A server runs 16 at once by default (MCP_TEAM_MAX_RUNS): 256 leaves a client room to
# follow a screenful of recent runs besides, while one request costs a bounded number of reads.
MAX_LISTEN_URIS = 256


def run_uri(run_id: str) -> str:
    return f"team://runs/{run_id}"


def install_run_updates(server: MCPServer[ServerState], state: ServerState) -> None:
    """`resources/subscribe` and `resources/unsubscribe`, and telling the listing's followers of both revisions."""
    watches: dict[tuple[int, str], anyio.CancelScope] = {}
    listing = ListingFollowers(state)

    async def follow(connection: Any, uri: str, run_id: str, scope: anyio.CancelScope) -> None:
        key = (id(connection), uri)
        try:
            with scope:
                runs = await state.runs.get()
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

    def forget(connection: Any) -> None:
        """The connection ended: it is told nothing more (a run's watch would poll until the run finished)."""
        listing.drop_connection(connection)
        for key in [key for key in watches if key[0] == id(connection)]:
            watches.pop(key).cancel()

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        connection = getattr(ctx.session, "_connection", ctx.session)  # lives as long as the client
        if (why := await refusal(state, uri)) is not None:
            raise MCPError(types.INVALID_PARAMS, why)
        if uri == LIST_URI:
            _when_closed(connection, lambda: forget(connection))
            await listing.add_connection(connection, caller())
            return types.EmptyResult()
        tg = state.rounds.task_group
        key = (id(connection), uri)
        if tg is not None and key not in watches:
            _when_closed(connection, lambda: forget(connection))
            watches[key] = scope = anyio.CancelScope()
            tg.start_soon(follow, connection, uri, uri.removeprefix("team://runs/"), scope)
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        connection = getattr(ctx.session, "_connection", ctx.session)
        if str(params.uri) == LIST_URI:
            listing.drop_connection(connection)
        scope = watches.pop((id(connection), str(params.uri)), None)
        if scope is not None:
            scope.cancel()
        return types.EmptyResult()

    lowlevel = lowlevel_of(server)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
    server.middleware.append(refuse_in_listen_filters(state))
    server.middleware.append(follow_listen_streams(listing))


async def refusal(state: ServerState, uri: str) -> str | None:
    """Why the caller cannot follow `uri`, in the same words on both revisions; None when it can. Refused: a URI
    nothing is ever told of, and a run the caller may not read, as a run that does not exist (the same words:
    another user's run must not be told to exist; and a watch on it would
    poll the store every second for as long as the connection lives)."""
    if uri == LIST_URI:
        return None
    match = RUN_URI.match(uri)
    if match is None:
        return (
            f"'{uri}' cannot be subscribed to: only a run's record (team://runs/{{run_id}}) and the list of runs "
            f"({LIST_URI}: told when a run starts or finishes) change"
        )
    try:
        record = await (await state.runs.get()).get(match.group(1))
    except ToolError as exc:  # durable runs are unavailable: it says why
        return str(exc)
    if record is None or not visible(record.owner):
        return f"no run '{match.group(1)}' on this server (see {LIST_URI})"
    return None


def refuse_in_listen_filters(state: ServerState) -> ServerMiddleware[Any]:
    """Middleware: the URIs of a `subscriptions/listen` filter (2026-07-28) the caller could not subscribe to on
    2025-11-25 (`refusal`) are refused. The listen protocol refuses part of a filter by leaving it out of the
    acknowledgment (the subset honored), which carries no reason: so when nothing else was asked for, the listen
    is answered instead with the error `resources/subscribe` gives (INVALID_PARAMS, naming each URI and why),
    rather than acknowledged as a stream that would never tell anything. A filter naming more than
    `MAX_LISTEN_URIS` is refused whole, before anything is read (INVALID_PARAMS, naming the limit)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        notifications = (ctx.params or {}).get("notifications") if ctx.method == "subscriptions/listen" else None
        uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            return await call_next(ctx)  # not a listen, or one the SDK says is malformed
        assert isinstance(notifications, Mapping)
        if len(uris) > MAX_LISTEN_URIS:  # refused before reading any: each run's costs a read
            raise MCPError(types.INVALID_PARAMS, too_many(len(uris)))
        refused = {uri: why for uri in dict.fromkeys(uris) if (why := await refusal(state, uri)) is not None}
        if not refused:
            return await call_next(ctx)
        honored = {**notifications, "resourceSubscriptions": [uri for uri in uris if uri not in refused]}
        if not any(honored.values()):  # no URI left, no list change nor extension's key asked for
            raise MCPError(types.INVALID_PARAMS, "; ".join(refused.values()))
        log.info("a listen filter's URIs left out of its acknowledgment: %s", "; ".join(refused.values()))
        return await call_next(replace(ctx, params={**(ctx.params or {}), "notifications": honored}))

    return middleware


def too_many(named: int) -> str:
    return (
        f"a listen filter names {named} resources; at most {MAX_LISTEN_URIS} are followed per listen stream: "
        f"listen to {LIST_URI} to be told when a run starts or finishes (then read its record), or name "
        "fewer runs in each stream"
    )


def _when_closed(connection: Any, forget: Callable[[], None]) -> None:
    """Call `forget` when `connection` ends (once, however often it subscribes): the SDK unwinds a connection's
    exit stack when its client goes, and tells nothing else."""
    stack, scratch = getattr(connection, "exit_stack", None), getattr(connection, "state", None)
    if stack is None or not isinstance(scratch, dict) or scratch.get(CLOSE_HOOK):
        return
    scratch[CLOSE_HOOK] = True
    stack.callback(forget)


def follow_runs(state: ServerState, tg: anyio.abc.TaskGroup) -> Callable[[Runs, anyio.abc.TaskGroup], None]:
    """What the server's run service does once open (`ServerRuns.follow`): publish every run this process
    writes (`publish_updates`, in `tg`, the server's task group) and, on a database others write to too
    (replicas; `mcp-team run` on this state directory), the runs they write (`follow_other_processes`)."""

    def opened(runs: Runs, inner: anyio.abc.TaskGroup) -> None:
        runs.store.on_write = publish_updates(state, tg)
        if runs.durable is not None:
            inner.start_soon(follow_other_processes, state, runs.store)

    return opened


def publish_updates(state: ServerState, tg: anyio.abc.TaskGroup) -> Callable[[dict[str, str | None]], None]:
    """A run store listener (`on_write`) that publishes `ResourceUpdated` for every run written (2026-07-28
    streams), to the streams of those who may see the run; nothing while no stream is open."""

    def written(owners: dict[str, str | None]) -> None:
        if state.bus.listeners:
            tg.start_soon(_publish, state, owners)

    return written


async def _publish(state: ServerState, owners: Mapping[str, str | None]) -> None:
    """Tell the streams of those who may see each run that it changed: another's must not learn even when."""
    for run_id, owner in owners.items():
        await state.bus.publish_to(ResourceUpdated(uri=run_uri(run_id)), functools.partial(sees, owner=owner))


async def follow_other_processes(state: ServerState, store: RunStore) -> None:
    """Publish `ResourceUpdated` for runs written by other processes (replicas on one database, `mcp-team run` on
    the same state directory), which `publish_updates` never hears of, as it does; runs changed here may be told
    twice, which a listener only re-reads. A run's owner is read once, the first time it is seen changed (the poll
    reads only ids and stamps)."""
    seen: dict[str, float] = {}
    owners: dict[str, str | None] = {}  # of the runs in `seen`: an owner never changes
    since = time.time()
    while True:
        await anyio.sleep(POLL)
        if not state.bus.listeners:
            seen.clear()
            owners.clear()
            since = time.time()
            continue
        try:
            changed = await anyio.to_thread.run_sync(_changed_since, store, since - LOOKBACK, owners)
        except Exception as exc:  # the database is away: the next poll tries again
            log.debug("could not look for runs changed elsewhere: %s", exc)
            continue
        told = {}
        for run_id, stamp in changed:
            if seen.get(run_id) != stamp and run_id in owners:
                seen[run_id] = stamp
                told[run_id] = owners[run_id]
        await _publish(state, told)
        since = max([since, *(stamp for _, stamp in changed)])
        seen = {run_id: stamp for run_id, stamp in seen.items() if stamp > since - LOOKBACK}
        owners = {run_id: owner for run_id, owner in owners.items() if run_id in seen}


def _changed_since(store: RunStore, since: float, owners: dict[str, str | None]) -> list[tuple[str, float]]:
    """`store.changed_since`, adding to `owners` those of the runs not in it (in a thread: it reads). A run whose
    record cannot be read (gone; a newer version's: pydantic's ValidationError) stays out: told to nobody."""
    changed = store.changed_since(since)
    for run_id, _stamp in changed:
        with contextlib.suppress(ValueError):
            if run_id not in owners and (record := store.get(run_id)) is not None:
                owners[run_id] = record.owner
    return changed
