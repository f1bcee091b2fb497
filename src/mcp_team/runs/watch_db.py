"""The runs database's SQLite file, watched under a running server: deleted, replaced or corrupted, it is noticed
within seconds, so the server stops taking runs (which would be written into an unlinked file and lost at the
next start, or into a damaged one) and exits, saying why.

Every `LOOK_EVERY` seconds the file's identity (device and inode, as opened) is looked at with `stat`: a file
deleted or renamed away, or another file put in its place, is said at once. Every `CHECK_EVERY` seconds SQLite's
`quick_check` reads the whole file on a connection of its own (a damaged header or page is found there, not at
the next start); a lock or a busy file only postpones it.

The file is never opened here but through SQLite: closing any descriptor of a database file drops every POSIX
lock the process holds on it (SQLite's "How To Corrupt" §2.2), so another process could take itself for the last
one, checkpoint and delete the WAL, and this server would go on writing into an unlinked WAL: runs that seem to
go on and are never seen (a resumed run's record stayed `running`). SQLite keeps its locks across its own
connections in one process, so `quick_check`'s connection is safe.
PostgreSQL has no file here: a database dropped or away shows as errors, which the store waits out.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import anyio

log = logging.getLogger(__name__)

LOOK_EVERY = 1.0  # seconds between looks at the file's identity
CHECK_EVERY = 5.0  # seconds between integrity checks (SQLite's quick_check): a damaged file within 10 s


def identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def look(path: Path, known: tuple[int, int]) -> str | None:
    """What is wrong with the file at `path` now, seen from outside (its identity, by `stat`), or None."""
    try:
        now = identity(path)
    except FileNotFoundError:
        return f"the runs database {path} was deleted (or moved away) while the server ran"
    except OSError as exc:
        return f"the runs database {path} cannot be looked at: {exc.strerror or exc}"
    if now != known:
        return f"the runs database {path} was replaced by another file while the server ran"
    return None


def check(path: Path) -> str | None:
    """SQLite's `quick_check` of the file (blocking): what it found damaged, or None. Only SQLite's own word for
    a damaged file counts (SQLITE_CORRUPT, SQLITE_NOTADB); anything else (a lock, an I/O error while another
    process recovers the WAL) is looked at again at the next check."""
    try:
        # Read-write, as the server's own connections: a read-only one cannot recover a WAL a killed process left,
        # and fails with an I/O error that says nothing of the file itself.
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None  # gone or unreadable: `look` says which
    try:
        rows = conn.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        name = getattr(exc, "sqlite_errorname", "")
        if isinstance(name, str) and name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return f"the runs database {path} is damaged ({exc})"
        log.debug("the runs database's integrity check is put off: %s", exc)
        return None
    finally:
        conn.close()
    found = [str(row[0]) for row in rows]
    return None if found == ["ok"] else f"the runs database {path} is damaged ({'; '.join(found)[:300]})"


async def watch_database(path: Path, broken: Callable[[str], None]) -> None:
    """Until cancelled, or until the file at `path` is found deleted, replaced or damaged: then `broken(why)`."""
    known = identity(path)
    since_check = 0.0
    while True:
        await anyio.sleep(LOOK_EVERY)
        since_check += LOOK_EVERY
        problem = look(path, known)
        if problem is None and since_check >= CHECK_EVERY:
            since_check = 0.0
            problem = await anyio.to_thread.run_sync(check, path)
        if problem is not None:
            broken(problem)
            return
