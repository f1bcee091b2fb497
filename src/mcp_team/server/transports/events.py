"""Resumable streamable HTTP: what a client missed while its SSE stream was down, kept for it to replay.

Every message the server sends on an SSE stream gets an event id; a client that loses its connection during a
long `run_team` reconnects with `Last-Event-ID` and receives the progress and the result it missed. The SDK
asks an `EventStore` for exactly two things (store an event, replay the events after an id), so the store is
one small class: this one keeps events in memory; a store in the run database can replace it behind the same
interface when durable runs exist.

Memory is bounded in bytes over all streams (oldest dropped first) and per stream (a stream's oldest dropped
first, its newest always kept), and in time: once a request's answer is stored its stream is kept
`finished_keep_seconds` (60 s) for a client to come back for it, then dropped whole; an event of a session's
standalone (GET) stream, which never ends with an answer, is kept as long; and a session's streams go with the
session (`scope_per_session`): nobody can resume them.

The SDK names a stream by its request's JSON-RPC id (and every standalone GET stream `_GET_stream`), while one
store serves all sessions, so two clients' streams share a name. `scope_per_session` gives each session a view
of the store under names of its own: a client resuming replays its own events only, never another's.

Events are kept as the JSON the SDK sends, so their size is known and a database row is a string.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_STREAM_BYTES = 8 * 1024 * 1024  # a run's progress and its result, with room for a large answer
FINISHED_KEEP_SECONDS = 60.0  # how long an answered stream waits for its client (told to retry after 1 s)
RETRY_MS = 1000  # the `retry` a client is told to wait before reconnecting


@dataclass(frozen=True, slots=True)
class _Event:
    stream_id: StreamId
    json: str | None  # None: a priming event, which marks a stream's start and carries no message


@dataclass(slots=True)
class _Stream:
    ids: deque[int] = field(default_factory=deque)
    size: int = 0


class MemoryEventStore(EventStore):
    """The events of every SSE stream, in memory, bounded in bytes overall and per stream, and in time once a
    stream's request is answered.

    Event ids are increasing integers (as text) over the whole store, so one id says where a client stopped
    and which stream it was on. A client whose last event was dropped gets nothing replayed (the SDK then
    serves what is still to come)."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        max_stream_bytes: int = DEFAULT_STREAM_BYTES,
        finished_keep_seconds: float = FINISHED_KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_bytes <= 0 or max_stream_bytes <= 0 or finished_keep_seconds < 0:
            raise ValueError("max_bytes and max_stream_bytes must be positive, finished_keep_seconds not negative")
        self.max_bytes = max_bytes
        self.max_stream_bytes = max_stream_bytes
        self.finished_keep_seconds = finished_keep_seconds
        self._clock = clock
        self._events: OrderedDict[int, _Event] = OrderedDict()
        self._streams: dict[StreamId, _Stream] = {}
        self._finished: OrderedDict[StreamId, float] = OrderedDict()  # stream -> when its answer was stored
        self._standalone: deque[tuple[float, int]] = deque()  # (when, event id) of the GET streams' events
        self._bytes = 0
        self._ids = itertools.count(1)

    # No __len__: the SDK tests the store for truth (`if self._event_store`), and an empty store must count.
    @property
    def event_count(self) -> int:
        return len(self._events)

    @property
    def stream_count(self) -> int:
        return len(self._streams)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        text = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True)
        # No await from here on: one event loop, so no lock is needed.
        now = self._clock()
        self._forget_finished(now)
        event_id = next(self._ids)
        self._events[event_id] = _Event(stream_id, text)
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = _Stream()
        stream.ids.append(event_id)
        size = _size(text)
        stream.size += size
        self._bytes += size
        if isinstance(message, JSONRPCResponse | JSONRPCError):  # the request is answered: its stream is done
            self._finished.pop(stream_id, None)
            self._finished[stream_id] = now
        elif stream_id.endswith(GET_STREAM_KEY):  # notifications (list changed, a task's status...), open-ended
            self._standalone.append((now, event_id))
        while stream.size > self.max_stream_bytes and len(stream.ids) > 1:
            self._drop_oldest(stream_id)
        while self._bytes > self.max_bytes and len(self._events) > 1:
            self._drop_oldest(next(iter(self._events.values())).stream_id)
        return str(event_id)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        try:
            last = int(last_event_id)
        except ValueError:
            return None  # not an id this store gave out
        start = self._events.get(last)
        if start is None:
            return None
        stream = self._streams[start.stream_id]
        later = [(i, self._events[i].json) for i in stream.ids if i > last]
        for event_id, text in later:
            if text is not None:
                message = jsonrpc_message_adapter.validate_json(text, by_name=False)
                await send_callback(EventMessage(message, str(event_id)))
        return start.stream_id

    def _drop_oldest(self, stream_id: StreamId) -> None:
        stream = self._streams[stream_id]
        event = self._events.pop(stream.ids.popleft())
        size = _size(event.json)
        stream.size -= size
        self._bytes -= size
        if not stream.ids:
            del self._streams[stream_id]
            self._finished.pop(stream_id, None)

    def forget(self, prefix: str) -> None:
        """Drop every stream whose name starts with `prefix` (a session's, once it has ended)."""
        for stream_id in [s for s in self._streams if s.startswith(prefix)]:
            self._drop_stream(stream_id)

    def _drop_stream(self, stream_id: StreamId) -> None:
        self._finished.pop(stream_id, None)
        stream = self._streams.pop(stream_id, None)
        for event_id in stream.ids if stream is not None else ():
            self._bytes -= _size(self._events.pop(event_id).json)

    def _forget_finished(self, now: float) -> None:
        while self._standalone and now - self._standalone[0][0] >= self.finished_keep_seconds:
            event = self._events.get(self._standalone.popleft()[1])
            if event is not None:  # not dropped already: it is the oldest of its stream, events come in order
                self._drop_oldest(event.stream_id)
        while self._finished:
            stream_id, finished_at = next(iter(self._finished.items()))
            if now - finished_at < self.finished_keep_seconds:
                return
            self._drop_stream(stream_id)


class SessionEventStore(EventStore):
    """One session's view of a shared store: its streams are stored under names of its own, and an event id of
    another session's stream replays nothing."""

    def __init__(self, store: EventStore, session_id: str) -> None:
        self._store = store
        self._prefix = f"{session_id}/"

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return await self._store.store_event(self._prefix + stream_id, message)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found: list[EventMessage] = []

        async def collect(event: EventMessage) -> None:
            found.append(event)

        stream_id = await self._store.replay_events_after(last_event_id, collect)
        if stream_id is None or not stream_id.startswith(self._prefix):
            return None  # not this session's: nothing is sent
        for event in found:
            await send_callback(event)
        return stream_id.removeprefix(self._prefix)


def scope_per_session(manager: StreamableHTTPSessionManager, store: MemoryEventStore) -> None:
    """Give every session `manager` opens its own view of `store` (see `SessionEventStore`), and drop its streams
    from `store` when it ends (a DELETE, the idle timeout): a client cannot resume a session that is gone.

    The SDK hands every session's transport the one store it was given and has no hook for a store per
    session, so this wraps the manager's admission of a session (private in SDK 2.3) and swaps the new
    transport's store (private too) for the session's view; likewise its discarding of a session, the one
    place every session ends. Stateless mode stores no events and is unaffected.
    """
    admit = manager._admit_session

    def admit_with_own_store(*args: Any, **kwargs: Any) -> Any:
        transport = admit(*args, **kwargs)
        if transport is not None and transport.mcp_session_id is not None:
            transport._event_store = SessionEventStore(store, transport.mcp_session_id)
        return transport

    manager._admit_session = admit_with_own_store  # type: ignore[method-assign]
    discard = manager._discard_session

    async def discard_with_streams(session_id: str, transport: Any) -> None:
        try:
            await discard(session_id, transport)
        finally:
            store.forget(f"{session_id}/")

    manager._discard_session = discard_with_streams  # type: ignore[method-assign]


def _size(text: str | None) -> int:
    return 64 + (len(text.encode()) if text is not None else 0)  # plus a rough overhead, so empty events count
