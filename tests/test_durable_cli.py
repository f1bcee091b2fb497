"""Durable runs' bad input at start-up, through the CLI: a wrong database URL, an unwritable state directory,
a database written by a newer mcp-team. Each is a one-line error naming what to fix, exit code 2, no
traceback, and nothing in the database changed."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, initialize, stdio_lines


def cli(
    *args: str, state: Path | None = None, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    extra = {"MCP_TEAM_MODEL": "offline", **({"MCP_TEAM_STATE_DIR": str(state)} if state else {}), **env}
    return subprocess.run([MCP_TEAM, *args], capture_output=True, text=True, timeout=HANG_GUARD,
                          env=clean_env(**extra), input=stdin)  # fmt: skip


def dump(db: Path) -> list[str]:
    """Every table's schema and rows (the bytes of the file may change when SQLite checkpoints its log)."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def assert_usage_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("mcp-team: error: ")]
    assert len(error) == 1, proc.stderr
    for word in words:
        assert word in error[0], error[0]


@pytest.mark.parametrize("command", [["run", "hi"], ["serve"], ["runs"]])
def test_a_wrong_database_url_is_a_clear_error(command: list[str]) -> None:
    proc = cli(*command, "--database-url", "mysql://db/runs", stdin="")
    assert_usage_error(proc, "unsupported database 'mysql'", "--database-url")
    relative = cli(*command, "--database-url", "sqlite:///", stdin="")
    assert_usage_error(relative, "needs a path")


@pytest.mark.parametrize("command", [["run", "hi"], ["serve"], ["serve", "--http", "--port", "1"]])
def test_an_unwritable_state_directory_is_a_clear_error(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    # serve over stdio opens durable runs once it has answered initialize: the client sees it answer, then exit
    proc = cli(*command, "--state-dir", str(blocker / "state"), stdin=stdio_lines(initialize(), INITIALIZED))
    assert_usage_error(proc, f"the state directory {blocker / 'state'} is not writable", "--state-dir")


def test_a_database_from_a_newer_version_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    first = cli("run", "--quiet", "Write a haiku", state=tmp_path)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "runs.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mcp_team_meta SET value = '99' WHERE key = 'schema_version'")
    before = dump(db)
    for command in (["run", "Write a haiku"], ["runs"], ["serve", "--http", "--port", "1"]):
        proc = cli(*command, state=tmp_path)
        assert_usage_error(proc, "written by a newer mcp-team", "Upgrade mcp-team", "Nothing was changed")
    assert dump(db) == before
    with sqlite3.connect(db) as conn:
        records = [json.loads(r) for (r,) in conn.execute("SELECT record FROM mcp_team_runs")]
    assert [r["status"] for r in records] == ["complete"]
