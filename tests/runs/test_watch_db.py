"""The runs database's watcher looks at the file without dropping the server's SQLite locks: a plain open and close
of a database file drops every POSIX lock the process holds on it, after which another process may take itself for
the last connection and delete the WAL the server still writes to (a resumed run's progress was never seen)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from mcp_team.runs.watch_db import check, identity, look

READ = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
print(conn.execute("SELECT count(*) FROM t").fetchone()[0])
conn.close()
"""


def _read_by_another_process(db: Path) -> int:
    """The rows another process sees; it opens the database, reads and closes, as `mcp-team runs show` does."""
    done = subprocess.run([sys.executable, "-c", READ, str(db)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_what_this_process_writes_after_a_look_is_seen_by_others(tmp_path: Path) -> None:
    # In WAL mode every connection holds a shared lock on the database file; the last one to close (the one
    # that can take it exclusively) checkpoints and deletes the WAL. Had a look dropped this process's lock,
    # the reader below would delete the WAL this connection still writes to, and never see the later rows.
    db = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    known = identity(db)
    for written in range(2, 5):
        assert look(db, known) is None
        assert check(db) is None
        assert _read_by_another_process(db) == written - 1
        conn.execute("INSERT INTO t VALUES (?)", (written,))
    assert _read_by_another_process(db) == 4
    conn.close()


def test_a_replaced_or_damaged_file_is_said(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    known = identity(db)
    assert look(db, known) is None and check(db) is None
    db.write_bytes(b"not a database at all" * 300)  # the same file, its header overwritten
    assert "damaged" in (check(db) or "")
    other = tmp_path / "other.sqlite"
    other.write_bytes(b"")
    db.unlink()
    other.rename(db)
    assert "replaced" in (look(db, known) or "")
    db.unlink()
    assert "deleted" in (look(db, known) or "")
