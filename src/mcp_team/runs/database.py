"""Connections to the runs database (SQLite file or PostgreSQL), checked before anything is written.

SQLite is tuned for one writer process: WAL (readers never wait for the writer), synchronous=NORMAL
(durable at each checkpoint of the WAL; a power cut may lose the last transactions, a process crash
loses nothing), IMMEDIATE transactions and one pooled connection shared by DBOS and the run store, so
writers of this process queue in the pool instead of sleeping in SQLite's busy handler. Measured:
about half of DBOS's per-step cost of the defaults (benchmarks/durable.py).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event

from mcp_team.errors import ConfigError, McpTeamError
from mcp_team.runs.config import DurableConfig

BUSY_TIMEOUT_MS = 30_000
READ_WAIT = 5.0  # seconds a read of the runs (get_run, listings) waits on a lock or a busy pool, then "busy, retry"

# DBOS on Python 3.12+ stamps its rows with `unixepoch('subsec')`, taking the Python version for SQLite's; the
# 'subsec' modifier is SQLite 3.42's, and an interpreter linked to an older SQLite (Debian 12 has 3.40: pyenv
# builds, its python3 packages) reads it as NULL, so DBOS could not launch ("NOT NULL constraint failed:
# application_versions.version_timestamp") and its time comparisons matched nothing. Such a database keeps that
# expression in its column defaults, so every process opening it defines the function, whatever its Python.
OLD_SQLITE = sqlite3.sqlite_version_info < (3, 42)


def _unixepoch(value: object) -> float | int | None:
    """SQLite 3.42's `unixepoch(X)`: 'subsec' is now in seconds to the millisecond; any other X as SQLite reads it."""
    if value in ("subsec", "subsecond"):
        return round(time.time(), 3)
    with closing(sqlite3.connect(":memory:")) as conn:  # a connection without this function: SQLite's own
        result: float | int | None = conn.execute("SELECT unixepoch(?)", (value,)).fetchone()[0]
        return result


def _define_functions(dbapi_conn: Any) -> None:
    if OLD_SQLITE:
        dbapi_conn.create_function("unixepoch", 1, _unixepoch)


def sqlite_engine(path: str) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}", pool_size=1, max_overflow=0, pool_timeout=120)

    @event.listens_for(engine, "connect")
    def _tune(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        _define_functions(dbapi_conn)

    return engine


def sqlite_reader(path: Path, *, immutable: bool = False) -> sa.Engine:
    """An engine that only reads `path`, for a state directory this user may not write (a backup, a
    read-only mount, another user's runs). SQLite opens a WAL database read-only only when its `-shm` file
    exists or may be created; when neither, no process has the database open (SQLite removes `-wal` and
    `-shm` when the last connection closes), so it is read as immutable: no locks, no shared memory."""
    live = not immutable and (os.access(path.parent, os.W_OK) or Path(f"{path}-shm").exists())
    mode = {"mode": "ro"} if live else {"immutable": "1"}
    url = sa.URL.create("sqlite", database=f"file:{quote(str(path))}", query={**mode, "uri": "true"})
    engine = sa.create_engine(url, pool_size=1, max_overflow=0, pool_timeout=120)

    @event.listens_for(engine, "connect")
    def _tune(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _define_functions(dbapi_conn)

    return engine


def reader_of(engine: sa.Engine) -> sa.Engine:
    """An engine for the run store's reads, beside `engine` (whose pool, one SQLite connection, DBOS's writes and
    ours share: a read queued behind a write held on another process's lock waited minutes). Its waits are
    bounded by `READ_WAIT` (the pool, SQLite's busy handler, a PostgreSQL statement): a read that cannot be
    served in that time fails, and the caller says "busy, retry". On SQLite in WAL mode a reader does not wait
    for writers at all, only for a lock taken in the middle of a checkpoint or a recovery."""
    url = engine.url
    wait_ms = int(READ_WAIT * 1000)
    if url.get_backend_name() == "sqlite":
        reader = sa.create_engine(url, pool_size=2, max_overflow=2, pool_timeout=READ_WAIT)

        @event.listens_for(reader, "connect")
        def _tune(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute(f"PRAGMA busy_timeout={wait_ms}")
            _define_functions(dbapi_conn)

        return reader
    timeouts = {"connect_timeout": 5, "options": f"-c statement_timeout={wait_ms}"}
    return sa.create_engine(
        url, pool_size=2, max_overflow=2, pool_timeout=READ_WAIT, pool_pre_ping=True, connect_args=timeouts
    )


class DatabaseBusy(McpTeamError, sa.exc.SQLAlchemyError):
    """A read of the runs database waited `READ_WAIT` seconds on a lock or a busy connection pool: said at once,
    for the caller to retry, rather than holding the call for minutes. A database error too, so what reads the
    database in the background and retries its errors retries this one."""


def is_busy(exc: BaseException) -> bool:
    """Whether a read failed for waiting: a lock held (SQLite's SQLITE_BUSY, PostgreSQL's statement timeout or
    lock timeout) or no pooled connection free in time."""
    if isinstance(exc, sa.exc.TimeoutError):
        return True
    orig = getattr(exc, "orig", None) or exc
    name = getattr(orig, "sqlite_errorname", "")
    return (isinstance(name, str) and name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))) or getattr(
        orig, "sqlstate", ""
    ) in ("57014", "55P03")


def postgres_engine(url: str, pool_size: int = 2) -> sa.Engine:
    return sa.create_engine(url, pool_size=pool_size, max_overflow=2, pool_pre_ping=True,
                            connect_args={"connect_timeout": 5})  # fmt: skip


def open_engine(config: DurableConfig, *, read_only: bool = False) -> sa.Engine:
    """The engine for the run store (and DBOS, on SQLite), after checking the place is usable; with
    `read_only`, an existing SQLite file opened for reading only (the state directory need not be writable).

    `ConfigError` naming what to fix: an unwritable state directory or SQLite file, a file that is not an
    SQLite database (or a damaged one), an unreachable PostgreSQL server, a refused login."""
    path = config.sqlite_path
    if path is not None:
        check_state_dir(path.parent, config)
        if read_only:
            engine = sqlite_reader(path)
        else:
            _check_writable(path.parent, config)
            if path.exists() and not os.access(path, os.R_OK | os.W_OK):
                raise ConfigError(
                    f"the runs database {path} is not readable and writable by this user; fix its "
                    f"permissions or {_fix(config)}"
                )
            engine = sqlite_engine(str(path))
    else:
        engine = postgres_engine(config.database_url)
    try:
        with engine.connect() as conn:
            # On SQLite, reading the schema finds a damaged file now, not in the middle of a run.
            conn.execute(sa.text("SELECT count(*) FROM sqlite_master" if path is not None else "SELECT 1"))
    except sa.exc.DatabaseError as exc:
        engine.dispose()
        if path is None and isinstance(exc, sa.exc.OperationalError) and _no_such_database(exc, config):
            return _create_postgres_database(config)
        if path is not None and is_damaged(exc):
            raise damaged(path, exc, config) from None
        if path is not None and _full_disk(exc, path):
            if read_only:
                return _read_as_last_written(path, config)
            raise ConfigError(
                f"cannot open the runs database {config.redacted_url}: {_said(exc)} (the disk holding it is full: "
                "free some space)"
            ) from None
        raise ConfigError(f"cannot open the runs database {config.redacted_url}: {reason_of(exc)}") from None
    return engine


FULL_BELOW = 1 << 20  # bytes free: SQLite's shared-memory file alone needs 32 KiB


def _full_disk(exc: sa.exc.DatabaseError, path: Path) -> bool:
    """Whether SQLite's error comes from a full disk: opening a WAL database sizes its `-shm` file, which fails as
    a plain "disk I/O error" (SQLITE_IOERR_SHMSIZE), not SQLITE_FULL, when there is no space for it."""
    if is_full(exc):
        return True
    name = getattr(exc.orig, "sqlite_errorname", "")
    if not (isinstance(name, str) and name.startswith("SQLITE_IOERR")):
        return False
    try:
        return shutil.disk_usage(path.parent).free < FULL_BELOW
    except OSError:
        return False


def _read_as_last_written(path: Path, config: DurableConfig) -> sa.Engine:
    """`mcp-team runs` on a full disk: SQLite cannot make the shared memory a reader of a WAL database needs, so
    read the file as it was last written in full (what a run wrote since its last checkpoint is not seen)."""
    engine = sqlite_reader(path, immutable=True)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT count(*) FROM sqlite_master"))
    except sa.exc.DatabaseError as exc:
        engine.dispose()
        raise ConfigError(
            f"cannot read the runs database {config.redacted_url}: {_said(exc)} (its disk is full: free some space)"
        ) from None
    return engine


def _no_such_database(exc: sa.exc.OperationalError, config: DurableConfig) -> bool:
    """Whether PostgreSQL said the URL's database does not exist. A connection refused at start-up carries no
    SQLSTATE, so the server's words decide; "does not exist" alone also matched `role "x" does not exist` (a
    wrong user), which was then reported as a database that could not be created."""
    name = sa.make_url(config.database_url).database
    return f'database "{name}" does not exist' in str(exc.orig)


def damaged(path: Path, exc: BaseException, config: DurableConfig | None = None) -> ConfigError:
    """The error for an SQLite file that is not a database, or a damaged one ("database disk image is
    malformed"): nothing mcp-team can repair, so say how to start afresh or keep using another place."""
    return ConfigError(
        f"the runs database {path} is not a usable SQLite database ({_said(exc)}); move it aside "
        f"(with any {path.name}-wal and {path.name}-shm beside it) to start a new one there, or "
        f"{_fix(config)}"
    )


def _named_by_url(config: DurableConfig | None) -> bool:
    """Whether the SQLite file is where --database-url put it, not in the state directory."""
    if config is None or config.sqlite_path is None:
        return False
    return config.sqlite_path.parent != config.state_dir


def _fix(config: DurableConfig | None) -> str:
    if _named_by_url(config):
        return "give another place in --database-url / MCP_TEAM_DATABASE_URL"
    return "choose another place with --state-dir / MCP_TEAM_STATE_DIR (or --database-url)"


def _directory(config: DurableConfig | None) -> str:
    return "the directory of --database-url" if _named_by_url(config) else "the state directory"


def check_state_dir(directory: Path, config: DurableConfig | None = None) -> None:
    """`ConfigError` if `directory`, or the nearest of its parents that exists, is not a directory."""
    blocker = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        problem = "is not a directory" if blocker == directory else f"cannot be created: {blocker} is not a directory"
        raise ConfigError(f"{_directory(config)} {directory} {problem}; {_fix(config)}")


def _check_writable(directory: Path, config: DurableConfig) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{_directory(config)} {directory} is not writable ({exc.strerror or exc}); {_fix(config)}"
        ) from None


def _create_postgres_database(config: DurableConfig) -> sa.Engine:
    """Create the database named in the URL (as DBOS would at launch), so the store can use it first."""
    url = sa.make_url(config.database_url)
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT",
                             connect_args={"connect_timeout": 5})  # fmt: skip
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{url.database}"'))
    except sa.exc.SQLAlchemyError as exc:
        raise ConfigError(
            f"the database {url.database!r} does not exist on {config.redacted_url} and could not be created: "
            f"{reason_of(exc)}; create it, or give a user that may"
        ) from None
    finally:
        admin.dispose()
    return postgres_engine(config.database_url)


def reason_of(exc: BaseException) -> str:
    """An error in one line, as the driver said it (for messages that name what to fix); for a damaged
    SQLite file or a full disk, with what to do about it (the callers name the file)."""
    said = _said(exc)
    if is_damaged(exc):
        said += " (the file is damaged: move it aside, with any -wal and -shm files beside it, or choose another "
        said += "--state-dir)"
    elif is_full(exc):
        said += " (the disk is full: free some space)"
    elif is_refused(exc):
        said += " (this database user lacks a privilege on the runs tables: have their owner grant it, or use the "
        said += "user that made them in --database-url / MCP_TEAM_DATABASE_URL)"
    return said


def is_refused(exc: BaseException) -> bool:
    """Whether PostgreSQL refused the user a privilege (insufficient_privilege): no retry fixes it."""
    return getattr(getattr(exc, "orig", None) or exc, "sqlstate", "") == "42501"


def is_full(exc: BaseException) -> bool:
    """Whether the database's disk is full (SQLite's SQLITE_FULL, PostgreSQL's disk_full): a wait fixes it once
    someone frees space, where DBOS's own retries give up at once."""
    orig = getattr(exc, "orig", None) or exc
    return getattr(orig, "sqlite_errorname", "") == "SQLITE_FULL" or getattr(orig, "sqlstate", "") == "53100"


def is_damaged(exc: BaseException) -> bool:
    """Whether SQLite found its file is no database or a damaged one: no retry or permission fixes it."""
    name = getattr(getattr(exc, "orig", None) or exc, "sqlite_errorname", "")
    return isinstance(name, str) and name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def _said(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:300]
