"""The run store of the runs database (`SqlRunStore`): one row per run, readable from any process or replica.

Written outside DBOS's step numbering (plain tables next to DBOS's), so what `team://runs`, `get_run` and
`mcp-team runs` show never depends on replaying anything. It holds durable runs and runs that cannot resume (on
the client's model through sampling). What it shares with the in-memory store is in runs/store.py.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from importlib.metadata import version

import sqlalchemy as sa
from pydantic import ValidationError

from mcp_team import __version__
from mcp_team.errors import ConfigError
from mcp_team.runs.database import READ_WAIT, DatabaseBusy, is_busy, is_full, reader_of, reason_of
from mcp_team.runs.store import RunStore
from mcp_team.runs.tables import STORE_SCHEMA, meta_table, metadata, row_of, runs_table
from mcp_team.runs.types import FINISHED, RunRecord

log = logging.getLogger(__name__)

_INSUFFICIENT_PRIVILEGE = "42501"  # PostgreSQL's SQLSTATE, e.g. "must be owner of table"


class SqlRunStore(RunStore):
    """The runs database's store (see the module docstring)."""

    # A lock held, the database away, its disk full, or no pooled connection free in time (a write queued behind
    # another held on a lock): each is waited out, with backoff, saying so.
    Retriable = (sa.exc.OperationalError, sa.exc.TimeoutError)

    def __init__(self, engine: sa.Engine, *, interval: float = 0.25) -> None:
        super().__init__(interval=interval)
        self.engine = engine
        self.reader = reader_of(engine)  # reads wait at most READ_WAIT seconds, on a pool of their own

    def dispose(self) -> None:
        self.reader.dispose()
        self.engine.dispose()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sa.Connection]:
        """A connection for a read; `DatabaseBusy` when the read waited `READ_WAIT` seconds on a lock or the pool."""
        try:
            with self.reader.connect() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            if is_busy(exc):
                raise DatabaseBusy(
                    f"the runs database is busy (another process holds its lock: {reason_of(exc)}); nothing was "
                    f"read after {READ_WAIT:g} s: retry in a few seconds"
                ) from None
            raise

    def _retry_note(self, exc: BaseException) -> str:
        if is_full(exc):
            return f"its disk is full: {reason_of(exc)}"
        if is_busy(exc):
            return f"it is locked or busy: {reason_of(exc)}"
        return f"it is not reachable: {reason_of(exc)}"

    # --- schema -------------------------------------------------------------------------------
    def check_version(self) -> None:
        """`ConfigError` if a newer mcp-team, or an mcp-team on a newer DBOS, wrote this database. Reads only.

        DBOS itself would upgrade its tables, or run on tables a newer DBOS migrated: the version of the DBOS that
        last opened the database is kept beside ours (`create`) and compared here."""
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
        dbos_then, dbos_now = rows.get("dbos_version"), version("dbos")
        if dbos_then and _release(dbos_then) > _release(dbos_now):
            raise ConfigError(
                f"the runs database was written by a newer DBOS ({dbos_then}; this mcp-team runs DBOS {dbos_now}), "
                f"whose tables this one may not read. Upgrade mcp-team (and DBOS), or use another database "
                f"(--state-dir / --database-url). Nothing was changed."
            )

    def exists(self) -> bool:
        """Whether the tables are there (a database no durable run ever used has none)."""
        with self.engine.connect() as conn:
            return sa.inspect(conn).has_table("mcp_team_runs")

    def create(self) -> None:
        metadata.create_all(self.engine)
        self._add_indexes()
        with self.engine.begin() as conn:
            meta = {"schema_version": str(STORE_SCHEMA), "written_by": __version__, "dbos_version": version("dbos")}
            for key, value in meta.items():
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

    def _finish_if_running(self, r: RunRecord) -> bool:
        with self.engine.begin() as conn:
            running = (runs_table.c.run_id == r.run_id) & runs_table.c.status.not_in(FINISHED)
            return conn.execute(sa.update(runs_table).where(running).values(**row_of(r))).rowcount == 1

    def _write_batch(self, records: Sequence[RunRecord]) -> frozenset[str]:
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
        with self._reading() as conn:
            rows = conn.execute(sa.select(runs_table.c.run_id, runs_table.c.record).where(cancelled)).all()
        return {run_id: _reason(record) for run_id, record in rows}

    def changed_since(self, since: float) -> builtins.list[tuple[str, float]]:
        """`(run_id, updated_at)` of the runs written (by any process) after `since`."""
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(runs_table.c.run_id, runs_table.c.updated_at).where(runs_table.c.updated_at > since)
            ).all()
        return [(r[0], r[1]) for r in rows]

    def statuses_since(self, since: float, *, running: bool = False) -> builtins.list[tuple[str, str, float]]:
        """`(run_id, status, updated_at)` of the runs written (by any process) after `since` and, with `running`,
        of every run not finished besides. The columns only: a look every second must not parse every record
        written with progress (the owner is in the record: `get` the few that matter)."""
        c = runs_table.c
        where = c.updated_at > since
        if running:
            where = sa.or_(where, c.status.not_in(FINISHED))
        with self._reading() as conn:
            rows = conn.execute(sa.select(c.run_id, c.status, c.updated_at).where(where)).all()
        return [(r[0], r[1], r[2]) for r in rows]

    def _read(self, run_id: str) -> RunRecord | None:
        with self._reading() as conn:
            row = conn.execute(sa.select(runs_table.c.record).where(runs_table.c.run_id == run_id)).first()
        return RunRecord.model_validate_json(row[0]) if row else None

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
        q = sa.select(runs_table.c.record)
        if status is not None:
            q = q.where(runs_table.c.status.in_(list(status)))
        if thread is not None:
            q = q.where(runs_table.c.thread_id == thread)
        if executor_id is not None:
            q = q.where(runs_table.c.executor_id == executor_id)
        order = runs_table.c.started_at.asc() if oldest_first else runs_table.c.started_at.desc()
        with self._reading() as conn:
            rows = conn.execute(q.order_by(order).limit(limit).offset(offset)).all()
        return [RunRecord.model_validate_json(r[0]) for r in rows]

    def updated_at(self, run_id: str) -> float | None:
        with self._reading() as conn:
            row = conn.execute(sa.select(runs_table.c.updated_at).where(runs_table.c.run_id == run_id)).first()
        return row[0] if row else None


def _reason(record: str) -> str | None:
    """The reason of a stored cancelled record; None when this version cannot read the record (one written by a
    newer version): its status column says cancelled all the same, and the run is stopped without it."""
    try:
        return RunRecord.model_validate_json(record).reason
    except ValidationError:
        return None


def _release(text: str) -> tuple[int, ...]:
    """A version's release numbers (`3.4.0` -> (3, 4, 0)), to compare two."""
    return tuple(int(n) for n in re.findall(r"\d+", text.split("+")[0])[:3])
