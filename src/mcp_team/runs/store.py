"""The run store: one row per run in the runs database, readable from any process or replica.

Written outside DBOS's step numbering (plain tables next to DBOS's), so what `team://runs`, `get_run`
and `mcp-team runs` show never depends on replaying anything. It holds durable runs and runs that
cannot resume (on the client's model through sampling). Progress is coalesced: `put` only marks a run
dirty; a background flush writes every dirty run in one transaction, at most every `interval` seconds,
so a K=32 fan-out's progress costs a few writes. `put_later` queues a way to take the record instead of
the record itself, so a run's progress events cost no copy of its record each (a K=32 fan-out has 64).
`write` is the immediate form, for a run's start and end and each finished handoff (awaited, so a crash
never loses a handoff that was reported finished).
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence

import anyio
import sqlalchemy as sa
from pydantic import ValidationError

from mcp_team import __version__
from mcp_team.errors import ConfigError
from mcp_team.runs.database import is_full, reason_of
from mcp_team.runs.tables import (
    FINISHED,
    STORE_SCHEMA,
    RunRecord,
    meta_table,
    metadata,
    row_of,
    runs_table,
)

log = logging.getLogger(__name__)

_INSUFFICIENT_PRIVILEGE = "42501"  # PostgreSQL's SQLSTATE, e.g. "must be owner of table"
KEEP_FINISHED = 256  # at most this many finished records kept for their waiting subscribers


class RunStore:
    def __init__(self, engine: sa.Engine, *, interval: float = 0.25) -> None:
        self.engine = engine
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

    # --- schema -------------------------------------------------------------------------------
    def check_version(self) -> None:
        """`ConfigError` if a newer mcp-team wrote this database. Reads only."""
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("mcp_team_meta"):
                return
            rows = dict(conn.execute(sa.select(meta_table.c.key, meta_table.c.value)).all())
        found = int(rows.get("schema_version", "0") or 0)
        if found > STORE_SCHEMA:
            raise ConfigError(
                f"the runs database was written by a newer mcp-team ({rows.get('written_by', '?')}, run store "
                f"schema {found}; this is {__version__} with schema {STORE_SCHEMA}). Upgrade mcp-team, or use "
                f"another database (--state-dir / --database-url). Nothing was changed."
            )

    def exists(self) -> bool:
        """Whether the tables are there (a database no durable run ever used has none)."""
        with self.engine.connect() as conn:
            return sa.inspect(conn).has_table("mcp_team_runs")

    def create(self) -> None:
        metadata.create_all(self.engine)
        self._add_indexes()
        with self.engine.begin() as conn:
            for key, value in (("schema_version", str(STORE_SCHEMA)), ("written_by", __version__)):
                if conn.execute(sa.update(meta_table).where(meta_table.c.key == key).values(value=value)).rowcount == 0:
                    conn.execute(sa.insert(meta_table).values(key=key, value=value))

    def _add_indexes(self) -> None:
        """Create the indexes a database made by an older version lacks: `create_all` makes a table's indexes
        only with the table. Not a schema change: older versions read and write the tables as before. Only
        reads when nothing is missing (every start); a replica starting at the same time may create one first,
        so it is `IF NOT EXISTS`, and PostgreSQL's lost race (a duplicate name in its catalog) is tried again.
        A role that may write the tables but does not own them (PostgreSQL: only the owner adds an index) is
        told how to add it, in a warning, and goes on: an index only speeds reads up."""
        missing: list[sa.Index] = []
        with self.engine.connect() as conn:
            inspector = sa.inspect(conn)
            for table in metadata.sorted_tables:
                found = {index["name"] for index in inspector.get_indexes(table.name)}
                missing += [index for index in table.indexes if index.name not in found]
        for index in missing:
            create = sa.schema.CreateIndex(index, if_not_exists=True)
            for attempt in range(3):
                try:
                    with self.engine.begin() as conn:
                        conn.execute(create)
                    break
                except sa.exc.DBAPIError as exc:
                    if getattr(exc.orig, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:
                        log.warning(
                            "the runs database's index %s could not be added (%s): listing and following runs "
                            "read the whole table %s until its owner runs: %s",
                            index.name, reason_of(exc), index.table, create.compile(dialect=self.engine.dialect),
                        )  # fmt: skip
                        break
                    if attempt == 2 or not isinstance(exc, sa.exc.IntegrityError | sa.exc.ProgrammingError):
                        raise

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

    def _queued(self, run_id: str) -> RunRecord | None:
        queued = self._dirty.get(run_id)
        return None if queued is None else _taken(queued)

    async def write(self, record: RunRecord) -> None:
        """Write now (and anything queued with it)."""
        self._dirty[record.run_id] = record
        await self.flush()

    async def flush(self) -> None:
        async with self._flushing:
            if not self._dirty:
                return
            batch = {run_id: _taken(queued) for run_id, queued in self._dirty.items()}
            self._dirty = {}
            try:
                with anyio.CancelScope(shield=True):  # a batch taken is a batch written
                    kept = await anyio.to_thread.run_sync(self._write_batch, list(batch.values()))
            except sa.exc.OperationalError as exc:  # the database is away or full: wait, as DBOS's own writes do
                kept = await self._write_when_back(batch, exc)
        self._written(batch, kept)

    async def finish_if_running(self, record: RunRecord) -> bool:
        """Write finished `record` (a cancel's) only while the stored run is still running: a run that finished
        meanwhile, in another process, keeps its own record (its answer). True when it was written."""
        done = await anyio.to_thread.run_sync(self._finish_if_running, record)
        if done:
            self._written({record.run_id: record})
        return done

    def _finish_if_running(self, r: RunRecord) -> bool:
        with self.engine.begin() as conn:
            running = (runs_table.c.run_id == r.run_id) & runs_table.c.status.not_in(FINISHED)
            return conn.execute(sa.update(runs_table).where(running).values(**row_of(r))).rowcount == 1

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

    async def _write_when_back(self, batch: dict[str, RunRecord], exc: sa.exc.OperationalError) -> frozenset[str]:
        """Retry a batch until the database takes it (returns what `_write_batch` kept); cancelled meanwhile, it
        goes back in the queue."""
        backoff = 0.5
        try:
            while True:
                why = "its disk is full" if is_full(exc) else "it is not reachable"
                log.warning("the runs database cannot be written (%s: %s); retrying in %.1f s", why,
                            reason_of(exc), backoff)  # fmt: skip
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                try:
                    return await anyio.to_thread.run_sync(self._write_batch, list(batch.values()))
                except sa.exc.OperationalError as again:
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

    def _write_batch(self, records: Sequence[RunRecord]) -> frozenset[str]:
        """Write `records`; returns the ids of those not written because the stored run was cancelled: a cancel
        wins over the end the process running the run writes after it (that process stops the run when it sees
        the cancel, within a second, but the run may end first), or the user's cancel would be lost."""
        kept: set[str] = set()
        with self.engine.begin() as conn:
            for r in records:
                values = row_of(r)
                where = [runs_table.c.run_id == r.run_id]
                if not r.finished:  # progress never turns a finished run back into a running one: another
                    where.append(runs_table.c.status.not_in(FINISHED))  # replica may have cancelled it meanwhile
                elif r.status != "cancelled":  # only a cancel's own end (its finished handoffs) follows a cancel
                    where.append(runs_table.c.status != "cancelled")
                done = conn.execute(sa.update(runs_table).where(*where).values(**values))
                if done.rowcount == 0:
                    if self._missing(conn, r.run_id):
                        conn.execute(sa.insert(runs_table).values(run_id=r.run_id, **values))
                    elif r.finished:
                        kept.add(r.run_id)
        self.writes += 1
        return frozenset(kept)

    @staticmethod
    def _missing(conn: sa.Connection, run_id: str) -> bool:
        return conn.execute(sa.select(runs_table.c.run_id).where(runs_table.c.run_id == run_id)).first() is None

    # --- reads --------------------------------------------------------------------------------
    def cancelled_among(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Of `run_ids`, the runs recorded cancelled, with the reason given (for the cancellation watch, every
        second: one primary-key query, reading the record only of the runs cancelled)."""
        cancelled = runs_table.c.run_id.in_(list(run_ids)) & (runs_table.c.status == "cancelled")
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(runs_table.c.run_id, runs_table.c.record).where(cancelled)).all()
        return {run_id: _reason(record) for run_id, record in rows}

    def changed_since(self, since: float) -> list[tuple[str, float]]:
        """`(run_id, updated_at)` of the runs written (by any process) after `since`."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(runs_table.c.run_id, runs_table.c.updated_at).where(runs_table.c.updated_at > since)
            ).all()
        return [(r[0], r[1]) for r in rows]

    def statuses_since(self, since: float, *, running: bool = False) -> list[tuple[str, str, float]]:
        """`(run_id, status, updated_at)` of the runs written (by any process) after `since` and, with `running`,
        of every run not finished besides. The columns only: a look every second must not parse every record
        written with progress (the owner is in the record: `get` the few that matter)."""
        c = runs_table.c
        where = c.updated_at > since
        if running:
            where = sa.or_(where, c.status.not_in(FINISHED))
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(c.run_id, c.status, c.updated_at).where(where)).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def get(self, run_id: str) -> RunRecord | None:
        if (queued := self._queued(run_id)) is not None:
            return queued
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs_table.c.record).where(runs_table.c.run_id == run_id)).first()
        return RunRecord.model_validate_json(row[0]) if row else None

    async def kept(
        self, keep: Callable[[RunRecord], bool], *, limit: int, offset: int = 0, thread: str | None, deep: int
    ) -> list[RunRecord]:
        """The newest runs `keep` keeps, after the first `offset` of them, read a page of `limit` at a time (one
        page when the newest are kept) and at most `deep` runs deep. `keep` runs here, not in the thread."""
        found: list[RunRecord] = []
        read = functools.partial(self.list, thread=thread)
        for at in range(0, deep, limit):
            page = await anyio.to_thread.run_sync(functools.partial(read, limit=min(limit, deep - at), offset=at))
            found += filter(keep, page)
            if len(found) >= offset + limit or len(page) < limit:
                break
        return found[offset : offset + limit]

    def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        status: Sequence[str] | None = None,
        thread: str | None = None,
        executor_id: str | None = None,
        oldest_first: bool = False,
    ) -> list[RunRecord]:
        q = sa.select(runs_table.c.record)
        if status is not None:
            q = q.where(runs_table.c.status.in_(list(status)))
        if thread is not None:
            q = q.where(runs_table.c.thread_id == thread)
        if executor_id is not None:
            q = q.where(runs_table.c.executor_id == executor_id)
        order = runs_table.c.started_at.asc() if oldest_first else runs_table.c.started_at.desc()
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(order).limit(limit).offset(offset)).all()
        return [RunRecord.model_validate_json(r[0]) for r in rows]

    def updated_at(self, run_id: str) -> float | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs_table.c.updated_at).where(runs_table.c.run_id == run_id)).first()
        return row[0] if row else None

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


def _taken(queued: RunRecord | Callable[[], RunRecord]) -> RunRecord:
    return queued() if callable(queued) else queued


def _reason(record: str) -> str | None:
    """The reason of a stored cancelled record; None when this version cannot read the record (one written by a
    newer version): its status column says cancelled all the same, and the run is stopped without it."""
    try:
        return RunRecord.model_validate_json(record).reason
    except ValidationError:
        return None
