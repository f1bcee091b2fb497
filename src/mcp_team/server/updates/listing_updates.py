"""`team://runs`, the run listing: its subscribers are told when a run starts and when one finishes (in any state),
at most once a second each (`COALESCE`: a burst of runs is one notification), and only of runs they may see.

2025-11-25: `resources/subscribe` on it (run_updates.py), until the client unsubscribes or its connection ends;
2026-07-28: a `subscriptions/listen` stream whose filter names it (`follow_listen_streams`; each stream is told of
its own principal's runs: the bus knows whose each stream is). Progress within a run changes nothing the listing
shows, so it tells nobody. Where the changes come from (`ListingFollowers`): the run store, polled every second
while anyone follows the listing, so runs of this process, of another one on the same state directory
(`mcp-team run`, a second server) and of other replicas are told alike.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.subscriptions import ResourceUpdated

from mcp_team.server.auth import Caller
from mcp_team.server.state import ServerState

if TYPE_CHECKING:
    from mcp_team.runs.store import RunStore

log = logging.getLogger("mcp_team.server")
LIST_URI = "team://runs"
POLL = 1.0  # seconds between looks for runs other replicas wrote (as `resources/subscribe` follows them)
LOOKBACK = 10.0  # seconds: a replica whose clock is behind ours by less than this is not missed
COALESCE = 1.0  # seconds: the least time between two notifications of the listing to one subscriber


def follow_listen_streams(listing: ListingFollowers) -> ServerMiddleware[Any]:
    """Middleware: a `subscriptions/listen` stream (2026-07-28) whose filter names the listing follows it while it
    is open. The bus (`ListenedBus.publish_to`) delivers the listing's `ResourceUpdated` to it when its principal
    may see a changed run; what the listing learns from is watched only while a stream (or a 2025 subscriber)
    follows it."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "subscriptions/listen" or not _names_listing(ctx.params):
            return await call_next(ctx)
        stream = object()
        await listing.add_stream(stream)
        try:
            return await call_next(ctx)  # the stream: until the client closes it
        finally:
            listing.drop_stream(stream)

    return middleware


def _names_listing(params: Mapping[str, Any] | None) -> bool:
    notifications = (params or {}).get("notifications")
    uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
    return isinstance(uris, list) and LIST_URI in uris


def sees(who: Caller, owner: str | None) -> bool:
    """`tasks.visible` for a subscriber, who was taken when it subscribed: it is told outside any request of its
    own."""
    return who.sees(owner)


class ListingFollowers:
    """Who follows `team://runs`, and telling them when a run starts or finishes.

    While anyone follows, one task tells them (at most once per `COALESCE`) and, on a durable server, another
    looks at the run store every `POLL` seconds; both stop when the last follower leaves."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.connections: dict[int, tuple[Any, Caller]] = {}  # 2025-11-25: id(connection): it, who it is
        self.streams: set[object] = set()  # 2026-07-28 listen streams naming the listing (whose: the bus knows)
        self._owners: set[str | None] = set()  # of the runs started or finished since the followers were told
        self._wake: anyio.Event | None = None  # set when there is something to tell
        self._scope: anyio.CancelScope | None = None  # the tasks telling them and looking at the run store

    @property
    def following(self) -> bool:
        return bool(self.connections or self.streams)

    async def add_connection(self, connection: Any, who: Caller) -> None:
        self.connections[id(connection)] = (connection, who)
        await self._start()

    def drop_connection(self, connection: Any) -> None:
        self.connections.pop(id(connection), None)
        self._stop_if_idle()

    async def add_stream(self, stream: object) -> None:
        self.streams.add(stream)
        await self._start()

    def drop_stream(self, stream: object) -> None:
        self.streams.discard(stream)
        self._stop_if_idle()

    def changed(self, owners: Iterable[str | None]) -> None:
        """Runs of these owners started or finished: tell whoever may see one of them."""
        if not self.following or self._wake is None:
            return
        self._owners.update(owners)
        self._wake.set()

    async def _start(self) -> None:
        tg = self.state.rounds.task_group
        if self._scope is not None or tg is None:  # already following, or the lifespan has not started
            return
        self._scope = scope = anyio.CancelScope()
        self._owners.clear()
        self._wake = anyio.Event()
        # Before the subscriber is answered: a run it starts after that is told of, not taken for one that ran before.
        store = await self._store_now()
        tg.start_soon(self._run, scope, store)

    def _stop_if_idle(self) -> None:
        if not self.following and self._scope is not None:
            self._scope.cancel()
            self._scope = None

    async def _store_now(self) -> StoreLook | None:
        """The run store's runs as they are now; None when the run service is unavailable (nothing is written)."""
        try:
            runs = await self.state.runs.get()
            return await anyio.to_thread.run_sync(StoreLook.now, runs.store)
        except Exception as exc:  # unavailable (`ToolError`), or the database is away: nothing to compare with
            log.debug("could not read the runs to follow the listing: %s", exc)
            return None

    async def _run(self, scope: anyio.CancelScope, store: StoreLook | None) -> None:
        with scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._tell)
                if store is not None:
                    tg.start_soon(self._poll, store)

    async def _tell(self) -> None:
        while True:
            assert self._wake is not None
            await self._wake.wait()
            self._wake = anyio.Event()
            owners, self._owners = self._owners, set()
            if owners:
                await self._send(owners)
                await anyio.sleep(COALESCE)  # what changes meanwhile is told together, after

    async def _send(self, owners: set[str | None]) -> None:
        for connection, who in list(self.connections.values()):
            if any(sees(who, owner) for owner in owners):
                try:
                    await connection.send_resource_updated(LIST_URI)
                except Exception:  # the connection is going away: its end forgets it
                    log.debug("could not tell a subscriber that %s changed", LIST_URI, exc_info=True)
        if self.streams:  # to the listen streams of the principals who may see a changed run, and no other
            await self.state.bus.publish_to(
                ResourceUpdated(uri=LIST_URI), lambda who: any(sees(who, owner) for owner in owners)
            )

    async def _poll(self, store: StoreLook) -> None:
        while True:
            await anyio.sleep(POLL)
            try:
                owners = await anyio.to_thread.run_sync(store.look)
            except Exception as exc:  # the database is away: the next look tries again
                log.debug("could not look for runs that started or finished: %s", exc)
                continue
            self.changed(owners)


@dataclass
class StoreLook:
    """The statuses of the run store's runs as the listing's followers last heard of them, to tell a run that
    started or finished (a new status) from one that only went on (a new `updated_at`, the same status)."""

    store: RunStore
    statuses: dict[str, tuple[str, float]]  # run id: status, updated_at
    since: float  # the newest `updated_at` seen (or when the look began)

    @classmethod
    def now(cls, store: RunStore) -> StoreLook:
        """The runs running now and those written lately: what a new follower is not told of."""
        since = time.time()
        rows = store.statuses_since(since - LOOKBACK, running=True)
        return cls(store, {run_id: (status, stamp) for run_id, status, stamp in rows}, since)

    def look(self) -> list[str | None]:
        """The owners of the runs that started or finished since the last look (runs in a thread: it reads)."""
        from mcp_team.runs.types import FINISHED

        changed = []
        for run_id, status, stamp in self.store.statuses_since(self.since - LOOKBACK):
            if self.statuses.get(run_id, ("", 0.0))[0] != status:
                changed.append(run_id)
            self.statuses[run_id] = (status, stamp)
            self.since = max(self.since, stamp)
        # A finished run is not written again: forget it once no look can see it (a running one is kept, or its
        # next progress would look like a start).
        old = self.since - LOOKBACK
        self.statuses = {k: v for k, v in self.statuses.items() if v[0] not in FINISHED or v[1] > old}
        return [record.owner if (record := self.store.get(run_id)) is not None else None for run_id in changed]
