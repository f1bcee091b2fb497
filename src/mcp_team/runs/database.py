"""Connections to the runs database (SQLite file or PostgreSQL), checked before anything is written.

SQLite is tuned for one writer process: WAL (readers never wait for the writer), synchronous=NORMAL
(durable at each checkpoint of the WAL; a power cut may lose the last transactions, a process crash
loses nothing), IMMEDIATE transactions and one pooled connection shared by DBOS and the run store, so
writers of this process queue in the pool instead of sleeping in SQLite's busy handler. Measured:
about half of DBOS's per-step cost of the defaults (benchmarks/durable.py).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from mcp_team.errors import ConfigError
from mcp_team.runs.config import DurableConfig

BUSY_TIMEOUT_MS = 30_000


def sqlite_engine(path: str) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}", pool_size=1, max_overflow=0, pool_timeout=120)

    @event.listens_for(engine, "connect")
    def _tune(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    return engine


def postgres_engine(url: str, pool_size: int = 2) -> sa.Engine:
    return sa.create_engine(url, pool_size=pool_size, max_overflow=2, pool_pre_ping=True,
                            connect_args={"connect_timeout": 5})  # fmt: skip


def open_engine(config: DurableConfig) -> sa.Engine:
    """The engine for the run store (and DBOS, on SQLite), after checking the place is usable.

    `ConfigError` naming what to fix: an unwritable state directory or SQLite file, an unreachable
    PostgreSQL server, a refused login."""
    if config.sqlite_path is not None:
        _check_dir(config.sqlite_path.parent, config)
        if config.sqlite_path.exists() and not os.access(config.sqlite_path, os.R_OK | os.W_OK):
            raise ConfigError(
                f"the runs database {config.sqlite_path} is not readable and writable by this user; fix its "
                f"permissions or choose another place with --state-dir / MCP_TEAM_STATE_DIR"
            )
        engine = sqlite_engine(str(config.sqlite_path))
    else:
        engine = postgres_engine(config.database_url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as exc:
        engine.dispose()
        if config.sqlite_path is None and "does not exist" in str(exc.orig):
            return _create_postgres_database(config)
        raise ConfigError(f"cannot open the runs database {config.redacted_url}: {reason_of(exc)}") from None
    return engine


def _check_dir(directory: Any, config: DurableConfig) -> None:
    fix = "choose another with --state-dir / MCP_TEAM_STATE_DIR (or --database-url)"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ConfigError(f"the state directory {directory} is not writable ({exc.strerror or exc}); {fix}") from None


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
    """An error in one line, as the driver said it (for messages that name what to fix)."""
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:300]
