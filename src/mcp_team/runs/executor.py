"""Executor ids: which process owns (and after a restart, resumes) which runs.

DBOS resumes a run on the process started with the executor id that ran it, and two live processes with
one id would both run the same workflow. So an id is a lease held for the life of the process: a lock
file beside the SQLite database (`flock`, released by the kernel when the process dies, even by kill -9)
or a PostgreSQL session advisory lock (released when the connection drops). An explicit id
(`--executor-id` / `MCP_TEAM_EXECUTOR_ID`, e.g. a StatefulSet pod name for replicas) that another live
process holds is refused. Without one, a process takes the first free `<hostname>-<n>`: a single server
restarted gets `-0` again and resumes its runs; two stdio servers started by two clients get `-0` and `-1`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa

from mcp_team.errors import ConfigError
from mcp_team.runs.config import DurableConfig

MAX_SLOTS = 64
TAKEOVER_GRACE = 3.0  # seconds an explicit id waits for a takeover of its runs to finish


@dataclass
class ExecutorLease:
    executor_id: str
    _file: IO[str] | None = None
    _conn: Any = None

    def alive(self) -> bool:
        """Whether the lease still holds: a PostgreSQL lock dies with its connection (a database restart)."""
        if self._conn is None:
            return self._file is not None
        try:
            self._conn.execute(sa.text("SELECT 1")).scalar()
            self._conn.commit()
        except Exception:
            return False
        return True

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                # Unlock first: closing hands the connection back to the pool, and the lock would live on until
                # the pool is disposed and the server has ended that session (a restart could find it held).
                self._conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _advisory_key(self.executor_id)})
                self._conn.commit()
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def default_prefix() -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname() or "host").strip("-.") or "host"


def acquire(config: DurableConfig, engine: sa.Engine) -> ExecutorLease:
    """Take this process's executor id; `ConfigError` if the explicit one is held by a live process."""
    take = _file_lock if config.sqlite_path is not None else _advisory_lock
    if config.executor_id is not None:
        lease = take(config, engine, config.executor_id)
        # A replica taking over this id's runs holds its lease for the second that takes: wait that out.
        deadline = time.monotonic() + TAKEOVER_GRACE
        while lease is None and time.monotonic() < deadline:
            time.sleep(0.2)
            lease = take(config, engine, config.executor_id)
        if lease is None:
            raise ConfigError(
                f"another running mcp-team process already uses executor id {config.executor_id!r} on "
                f"{config.redacted_url}; give each process its own (--executor-id / MCP_TEAM_EXECUTOR_ID)"
            )
        return lease
    prefix = default_prefix()
    for n in range(MAX_SLOTS):
        if (lease := take(config, engine, f"{prefix}-{n}")) is not None:
            return lease
    raise ConfigError(f"{MAX_SLOTS} mcp-team processes already run on {prefix}; set --executor-id")


def lock_dir(config: DurableConfig) -> Path:
    assert config.sqlite_path is not None
    return config.sqlite_path.with_name(config.sqlite_path.name + ".executors")


def _file_lock(config: DurableConfig, engine: sa.Engine, executor_id: str) -> ExecutorLease | None:
    directory = lock_dir(config)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    file = open(directory / f"{executor_id}.lock", "a+")  # noqa: SIM115 - held for the life of the lease
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        return None
    file.truncate(0)
    file.write(f"{os.getpid()}\n")
    file.flush()
    return ExecutorLease(executor_id, _file=file)


def try_acquire(config: DurableConfig, engine: sa.Engine, executor_id: str) -> ExecutorLease | None:
    """`executor_id`'s lease if no live process holds it (a takeover holds a dead replica's id while it
    moves its runs, so the replica cannot come back half-way), else None."""
    return (_file_lock if config.sqlite_path is not None else _advisory_lock)(config, engine, executor_id)


def is_held(config: DurableConfig, engine: sa.Engine, executor_id: str) -> bool:
    """Whether a live process holds `executor_id` (for taking over a dead one's runs)."""
    lease = (_file_lock if config.sqlite_path is not None else _advisory_lock)(config, engine, executor_id)
    if lease is None:
        return True
    lease.release()
    return False


def holder_gone(config: DurableConfig, executor_id: str) -> bool:
    """Whether the process that ran `executor_id`'s runs on this SQLite database is gone (its lock file is there
    and nobody holds it), read without taking the lease: for `mcp-team runs`, which only reads. False when it
    cannot tell (PostgreSQL, where replicas take dead ones' runs over by themselves; no lock file)."""
    if config.sqlite_path is None:
        return False
    try:
        with open(lock_dir(config) / f"{executor_id}.lock", "rb") as file:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)  # let go when the file closes
    except BlockingIOError:  # held: its process lives
        return False
    except OSError:  # no such file, or not readable by this user
        return False
    return True


def _advisory_key(executor_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"mcp-team executor {executor_id}".encode(), digest_size=8).digest(),
                          "big", signed=True)  # fmt: skip


def _advisory_lock(config: DurableConfig, engine: sa.Engine, executor_id: str) -> ExecutorLease | None:
    conn = engine.connect()
    try:
        got = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": _advisory_key(executor_id)}).scalar()
        conn.commit()
    except Exception:
        conn.close()
        raise
    if not got:
        conn.close()
        return None
    return ExecutorLease(executor_id, _conn=conn)
