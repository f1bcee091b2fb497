"""A runs database that DBOS created under Python 3.12+ works whatever SQLite this Python is linked to.

DBOS on Python 3.12+ stamps its rows with `unixepoch('subsec')`, which only SQLite 3.42+ understands; older
ones (Debian 12's 3.40, under pyenv's or Debian's Python 3.12 and 3.13) read it as NULL, and durable runs
could not start: "NOT NULL constraint failed: application_versions.version_timestamp"."""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.process]

# How DBOS writes a column's default time on Python 3.11, and on 3.12+ (dbos/_migration.py).
BEFORE_3_12 = "(strftime('%s','now') * 1000)"
FROM_3_12 = "(unixepoch('subsec') * 1000)"


def run(state: Path) -> subprocess.CompletedProcess[str]:
    command = [MCP_TEAM, "run", "--state-dir", str(state), "hi"]
    env = clean_env(MCP_TEAM_MODEL="offline")
    return subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD, env=env, input="")


def test_a_database_dbos_created_under_python_3_12_runs_here_and_stamps_its_rows(tmp_path: Path) -> None:
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "runs.sqlite"
    # The schema as DBOS writes it under Python 3.12+ (already so when this test runs on 3.12+).
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE type = 'table'", (BEFORE_3_12, FROM_3_12))
    with closing(sqlite3.connect(db)) as conn:
        tables = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'application_versions'").fetchone()[0]
        assert FROM_3_12 in tables and conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    second = run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr, second.stderr
    with closing(sqlite3.connect(db)) as conn:
        stamps = conn.execute("SELECT version_timestamp, created_at FROM application_versions").fetchall()
        runs = conn.execute("SELECT created_at, updated_at FROM workflow_status ORDER BY created_at").fetchall()
    assert stamps and all(isinstance(t, int) and t > 0 for row in stamps for t in row), stamps
    assert len(runs) >= 2 and all(isinstance(t, int) and t > 0 for row in runs for t in row), runs
