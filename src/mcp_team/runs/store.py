"""The run store: one record per run, written as the run goes and read by whoever follows it (`team://runs`,
`get_run`, tasks, `mcp-team runs`). One interface, two implementations: `MemoryRunStore` (this module: an
`--ephemeral` server, an eval, a recorded run) and `SqlRunStore` (runs/sql_store.py: the runs database, readable
from any process or replica).

Progress is coalesced: `put` only marks a run dirty; a background flush writes every dirty run at once, at most
every `interval` seconds, so a K=32 fan-out's progress costs a few writes. `put_later` queues a way to take the
record instead of the record itself, so a run's progress events cost no copy of its record each (a K=32 fan-out
has 64). `write` is the immediate form, for a run's start and end and each finished handoff (awaited, so a crash
never loses a handoff that was reported finished). Reads take what is queued first: a record read here is never
older than what this process has.
"""

from __future__ import annotations

import builtins
import functools
import logging
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence

import anyio

from mcp_team.runs.types import FINISHED, RunRecord

log = logging.getLogger(__name__)

KEEP_FINISHED = 256  # at most this many finished records kept for their waiting subscribers


class RunStore:
    """What both stores share: the queue of records to write, flushing, subscriptions. A store says how it writes,
    reads and lists (`_write_batch`, `_read`, `list`...); `Retriable` names the errors its writes wait out."""

    Retriable: tuple[type[BaseException], ...] = ()

    def __init__(self, *, interval: float = 0.25) -> None:
        self.interval = interval
        self._dirty: dict[str, RunRecord | Callable[[], RunRecord]] = {}
        # finished records this process wrote while a subscriber here waited on them: final, so it takes one as
        # it is, not read back through a thread behind DBOS's end-of-workflow write
        self._finished: OrderedDict[str, RunRecord] = OrderedDict()
        self._wake = anyio.Event()
        self._changed: dict[str, anyio.Event] = {}
        self._flushing = anyio.Lock()  # batches commit in the order they were taken
        self.writes = 0  # transactions written, for tests and the benchmark
        # told the ids of every batch written, each with its run's owner (whose listen streams may hear of it)
        self.on_write: Callable[[dict[str, str | None]], None] | None = None
        # told when a write failed for good (an error no wait fixes): a server stops then (runs/health.py)
        self.on_failure: Callable[[Exception], None] | None = None

    # --- what a store implements --------------------------------------------------------------
    def _write_batch(self, records: Sequence[RunRecord]) -> frozenset[str]:
        """Write `records`; returns the ids of those not written because the stored run was cancelled: a cancel
        wins over the end the process running the run writes after it (that process stops the run when it sees
        the cancel, within a second, but the run may end first), or the user's cancel would be lost."""
        raise NotImplementedError

    def _read(self, run_id: str) -> RunRecord | None:
        raise NotImplementedError

    async def _commit(self, records: Sequence[RunRecord]) -> frozenset[str]:
        """`_write_batch`, off the event loop (a database write blocks)."""
        return await anyio.to_thread.run_sync(self._write_batch, records)

    def _finish_if_running(self, record: RunRecord) -> bool:
        raise NotImplementedError

    def _retry_note(self, exc: BaseException) -> str:
        """Why a write must wait, in words (for the log line said while it does)."""
        return str(exc)

    def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: Sequence[str] | None = None,
        thread: str | None = None,
        executor_id: str | None = None,
        oldest_first: bool = False,
    ) -> builtins.list[RunRecord]:
        """The newest runs first (oldest with `oldest_first`), filtered."""
        raise NotImplementedError

    def updated_at(self, run_id: str) -> float | None:
        raise NotImplementedError

    def cancelled_among(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Of `run_ids`, the runs recorded cancelled, with the reason given."""
        raise NotImplementedError

    def statuses_since(self, since: float, *, running: bool = False) -> builtins.list[tuple[str, str, float]]:
        """`(run_id, status, updated_at)` of the runs written after `since` and, with `running`, of every run not
        finished besides."""
        raise NotImplementedError

    def changed_since(self, since: float) -> builtins.list[tuple[str, float]]:
        """`(run_id, updated_at)` of the runs written after `since`."""
        raise NotImplementedError

    def get(self, run_id: str) -> RunRecord | None:
        """The run's record: what is queued here first, else what is stored (blocking for a database)."""
        if (queued := self._queued(run_id)) is not None:
            return queued
        return self._read(run_id)

    def stored(self, run_id: str) -> RunRecord | None:
        """The run's record as stored, whatever is queued here (blocking for a database)."""
        return self._read(run_id)

    # --- writes -------------------------------------------------------------------------------
    @property
    def watched(self) -> int:
        """How many runs a subscriber waits on a change of (each holds an event until it is written or left)."""
        return len(self._changed)

    def put(self, record: RunRecord) -> None:
        """Queue a write, coalesced with later ones; no I/O here. Subscribers here see it at once."""
        self.put_later(record.run_id, record)

    def put_later(self, run_id: str, record: RunRecord | Callable[[], RunRecord]) -> None:
        """`put`, where `record` may be a function returning the record, called only when the record is read
        or written, so changes in between cost nothing. It must not block, and only read: `get` may call it
        from a worker thread. Only progress is queued this way: a finished record is `put` as it is (a
        subscriber waiting for the `final` record does not call the function)."""
        self._dirty[run_id] = record
        self._wake.set()
        if (event := self._changed.pop(run_id, None)) is not None:
            event.set()

    async def page(
        self, *, limit: int, offset: int, thread: str | None, keep: Callable[[RunRecord], bool] | None, deep: int
    ) -> builtins.list[RunRecord]:
        """The newest runs (of `thread`, kept by `keep`: see `kept`) after the first `offset`, with what is queued
        here as it is now (`overlay`): a listing never waits on a write, which may wait minutes on a lock."""
        read = functools.partial(self.list, limit=limit, offset=offset, thread=thread)
        listed = await (self.kept(keep, limit=limit, offset=offset, thread=thread, deep=deep) if keep is not None
                        else anyio.to_thread.run_sync(read))  # fmt: skip
        return self.overlay(listed, limit=limit, first_page=offset == 0, thread=thread, keep=keep)

    def overlay(
        self,
        listed: Sequence[RunRecord],
        *,
        limit: int,
        first_page: bool,
        thread: str | None = None,
        keep: Callable[[RunRecord], bool] | None = None,
    ) -> builtins.list[RunRecord]:
        """`listed` (a page read from the store, newest first) with what is queued here and not yet written: each
        run as queued, and, on the first page, the queued runs the page lacks that belong on it (of `thread`,
        kept by `keep`, newer than the page's last one unless the page is not full)."""
        if not self._dirty:
            return list(listed)
        queued = {run_id: _taken(q) for run_id, q in list(self._dirty.items())}
        page = [queued.get(r.run_id, r) for r in listed]
        if first_page:
            seen = {r.run_id for r in listed}
            oldest = listed[-1].started_at if len(listed) >= limit else None
            extra = [r for r in queued.values() if r.run_id not in seen and (thread is None or r.thread == thread)
                     and (keep is None or keep(r)) and (oldest is None or r.started_at >= oldest)]  # fmt: skip
            if extra:
                page = sorted(page + extra, key=lambda r: r.started_at, reverse=True)[:limit]
        return page

    def _queued(self, run_id: str) -> RunRecord | None:
        queued = self._dirty.get(run_id)
        return None if queued is None else _taken(queued)

    async def write(self, record: RunRecord) -> None:
        """Write now (and anything queued with it); while the database cannot take it, wait (retrying, and saying
        so): what a run has done is never dropped."""
        self._dirty[record.run_id] = record
        await self.flush()

    async def write_new(self, record: RunRecord) -> None:
        """Write the record of a run that is only starting, now, or raise the database's error: a run that cannot be
        recorded is refused rather than started (nothing has happened yet that waiting would keep)."""
        async with self._flushing:
            with anyio.CancelScope(shield=True):
                await self._commit([record])
        self._written({record.run_id: record})

    async def flush(self) -> None:
        async with self._flushing:
            if not self._dirty:
                return
            batch = {run_id: _taken(queued) for run_id, queued in self._dirty.items()}
            self._dirty = {}
            try:
                try:
                    with anyio.CancelScope(shield=True):  # a batch taken is a batch written
                        kept = await self._commit(list(batch.values()))
                except self.Retriable as exc:  # the database is away or full: wait, as DBOS's own writes do
                    kept = await self._write_when_back(batch, exc)
            except Exception as exc:  # refused for good (no wait fixes it): kept in memory, and said
                self._dirty = {**batch, **self._dirty}
                if self.on_failure is not None:
                    self.on_failure(exc)
                raise
        self._written(batch, kept)

    async def finish_if_running(self, record: RunRecord) -> bool:
        """Write finished `record` (a cancel's) only while the stored run is still running: a run that finished
        meanwhile, in another process, keeps its own record (its answer). True when it was written."""
        done = await anyio.to_thread.run_sync(self._finish_if_running, record)
        if done:
            self._written({record.run_id: record})
        return done

    def _written(self, batch: dict[str, RunRecord], kept: frozenset[str] = frozenset()) -> None:
        """Tell the subscribers of each run of `batch` (and `on_write`) that it was written; of those in `kept`,
        that the stored record stays as another process wrote it (they read it back)."""
        for run_id, record in batch.items():
            if (event := self._changed.pop(run_id, None)) is not None:
                if record.finished and run_id not in kept:  # for the subscribers waiting on it (see `subscribe`)
                    self._finished[run_id] = record
                    if len(self._finished) > KEEP_FINISHED:
                        self._finished.popitem(last=False)
                event.set()
        if self.on_write is not None:
            self.on_write({run_id: record.owner for run_id, record in batch.items()})

    async def _write_when_back(self, batch: dict[str, RunRecord], exc: BaseException) -> frozenset[str]:
        """Retry a batch until the database takes it (returns what `_write_batch` kept); cancelled meanwhile, it
        goes back in the queue."""
        backoff = 0.5
        try:
            while True:
                log.warning("the runs database cannot be written (%s); retrying in %.1f s", self._retry_note(exc),
                            backoff)  # fmt: skip
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                try:
                    return await self._commit(list(batch.values()))
                except self.Retriable as again:
                    exc = again
        except BaseException:
            self._dirty = {**batch, **self._dirty}
            raise

    async def flush_loop(self) -> None:
        """Write queued records every `interval` seconds while there are any (run it in a task group)."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(self.interval)
            await self.flush()

    # --- reads --------------------------------------------------------------------------------
    async def kept(
        self, keep: Callable[[RunRecord], bool], *, limit: int, offset: int = 0, thread: str | None, deep: int
    ) -> builtins.list[RunRecord]:
        """The newest runs `keep` keeps, after the first `offset` of them, read a page of `limit` at a time (one
        page when the newest are kept) and at most `deep` runs deep. `keep` runs here, not in the thread."""
        found: builtins.list[RunRecord] = []
        read = functools.partial(self.list, thread=thread)
        for at in range(0, deep, limit):
            page = await anyio.to_thread.run_sync(functools.partial(read, limit=min(limit, deep - at), offset=at))
            found += filter(keep, page)
            if len(found) >= offset + limit or len(page) < limit:
                break
        return found[offset : offset + limit]

    async def subscribe(self, run_id: str, *, poll: float = 1.0, final: bool = False) -> AsyncIterator[RunRecord]:
        """The run's record now and after each change, until it is finished. Changes written by this
        process arrive at once; those of other processes within `poll` seconds. `final`: only the finished
        record is wanted, so progress queued here (a function: see `put_later`) is not taken at each change,
        which would cost the event loop a snapshot of every handoff while a fan-out starts or ends."""
        seen: float | None = None
        event: anyio.Event | None = None
        try:
            while True:
                event = self._changed.setdefault(run_id, anyio.Event())
                if final and callable(self._dirty.get(run_id)):  # progress of a run running here: not finished
                    with anyio.move_on_after(poll):
                        await event.wait()
                    continue
                queued = self._queued(run_id) or self._finished.get(run_id)
                stamp = (
                    queued.updated_at.timestamp() if queued else await anyio.to_thread.run_sync(self.updated_at, run_id)
                )
                if stamp is not None and stamp != seen:
                    seen = stamp
                    # a queued or finished record is the newest there is: no need to read it back through a thread
                    record = queued if queued is not None else await anyio.to_thread.run_sync(self.get, run_id)
                    if record is not None:
                        # The stamp may be of a queued record that a flush took meanwhile: `get` then reads the row
                        # before the flush commits. Remember what was read, so the committed record still comes.
                        seen = record.updated_at.timestamp()
                        yield record
                        if record.finished:
                            return
                with anyio.move_on_after(poll):
                    await event.wait()
        finally:
            # A finished run is never written again, so nothing would pop its event: drop it here (and wake
            # any other subscriber of the run, which then waits on a new one), or every run ever watched
            # keeps an event and its id in memory.
            if event is not None and self._changed.get(run_id) is event:
                del self._changed[run_id]
                event.set()
            # Kept only for the subscribers that waited on the run: records held for longer would stay in
            # memory after a burst of runs, scattered over what it used (another would read the row).
            self._finished.pop(run_id, None)


class MemoryRunStore(RunStore):
    """Runs kept in this process only (an `--ephemeral` server, an eval, a recorded run): every run still running,
    and the newest `max_finished` finished ones, each kept as compressed JSON (a record parsed now and then costs
    little, while 200 records as pydantic objects held about 24 KB each on the offline model against about 1 KB
    compressed). They end with the process."""

    def __init__(self, max_finished: int = 200) -> None:
        super().__init__()
        if max_finished < 1:
            raise ValueError("max_finished must be at least 1")
        self.max_finished = max_finished
        self._rows: OrderedDict[str, tuple[RunRecord | None, bytes]] = OrderedDict()  # running: the record itself

    def _write_batch(self, records: Sequence[RunRecord]) -> frozenset[str]:
        kept: set[str] = set()
        for r in records:
            stored = self._read(r.run_id)
            if (
                stored is not None
                and stored.finished
                and (not r.finished or (stored.status == "cancelled" and r.status != "cancelled"))
            ):
                if r.finished:
                    kept.add(r.run_id)
                continue  # as the database's conditional writes: a finished run stays as it ended
            self._rows.pop(r.run_id, None)
            self._rows[r.run_id] = (None, zlib.compress(r.model_dump_json().encode(), 1)) if r.finished else (r, b"")
        finished = [run_id for run_id, (live, _) in self._rows.items() if live is None]
        for run_id in finished[: max(len(finished) - self.max_finished, 0)]:
            del self._rows[run_id]
        self.writes += 1
        return frozenset(kept)

    async def _commit(self, records: Sequence[RunRecord]) -> frozenset[str]:
        return self._write_batch(records)  # memory: nothing to wait for, no thread needed

    def _read(self, run_id: str) -> RunRecord | None:
        live, packed = self._rows.get(run_id, (None, b""))
        return live if live is not None else RunRecord.model_validate_json(zlib.decompress(packed)) if packed else None

    def _finish_if_running(self, record: RunRecord) -> bool:
        stored = self._read(record.run_id)
        if stored is None or stored.finished:
            return False
        self._write_batch([record])
        return True

    def _all(self) -> builtins.list[RunRecord]:
        return [r for run_id in list(self._rows) if (r := self._read(run_id)) is not None]

    def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: Sequence[str] | None = None,
        thread: str | None = None,
        executor_id: str | None = None,
        oldest_first: bool = False,
    ) -> builtins.list[RunRecord]:
        found = [
            r for r in self._all()
            if (status is None or r.status in status) and (thread is None or r.thread == thread)
            and (executor_id is None or r.executor_id == executor_id)
        ]  # fmt: skip
        found.sort(key=lambda r: r.started_at, reverse=not oldest_first)
        return found[offset : offset + limit]

    def updated_at(self, run_id: str) -> float | None:
        record = self._read(run_id)
        return record.updated_at.timestamp() if record is not None else None

    def cancelled_among(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        return {r.run_id: r.reason for run_id in run_ids if (r := self._read(run_id)) and r.status == "cancelled"}

    def statuses_since(self, since: float, *, running: bool = False) -> builtins.list[tuple[str, str, float]]:
        return [
            (r.run_id, r.status, r.updated_at.timestamp())
            for r in self._all()
            if r.updated_at.timestamp() > since or (running and r.status not in FINISHED)
        ]

    def changed_since(self, since: float) -> builtins.list[tuple[str, float]]:
        return [(r.run_id, r.updated_at.timestamp()) for r in self._all() if r.updated_at.timestamp() > since]


def _taken(queued: RunRecord | Callable[[], RunRecord]) -> RunRecord:
    return queued() if callable(queued) else queued
