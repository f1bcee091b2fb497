"""Durable runs' bad input at start-up, through the CLI: a wrong database URL, a state directory that is a file
or under one, a database written by a newer mcp-team, a file that is no database or a damaged one. Each is a
one-line error naming what to fix, exit code 2, no traceback, and nothing in the database changed."""

from __future__ import annotations

import functools
import json
import select
import sqlite3
import subprocess
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import IO, Any

import pytest

from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, cli_here, initialize, stdio_lines

pytestmark = [pytest.mark.process]


def cli(
    *args: str, state: Path | None = None, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    extra = {"MCP_TEAM_MODEL": "offline", **({"MCP_TEAM_STATE_DIR": str(state)} if state else {}), **env}
    return subprocess.run([MCP_TEAM, *args], capture_output=True, text=True, timeout=HANG_GUARD,
                          env=clean_env(**extra), input=stdin)  # fmt: skip


def here(*args: str, state: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """`cli` through `main` in this process (`support.cli_here`): for a start-up error's words and exit code.
    Every kind of error is checked in a real process too (a stdio server's refusal here comes before serving)."""
    return cli_here(*args, MCP_TEAM_MODEL="offline", **({"MCP_TEAM_STATE_DIR": str(state)} if state else {}), **env)


def dump(db: Path) -> list[str]:
    """Every table's schema and rows (the bytes of the file may change when SQLite checkpoints its log)."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def assert_usage_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    said = (proc.args, proc.stderr)  # which command failed
    assert proc.returncode == 2, (proc.returncode, *said)
    assert "Traceback" not in proc.stderr, said
    error = [line for line in proc.stderr.splitlines() if line.startswith("mcp-team: error: ")]
    assert len(error) == 1, said
    for word in words:
        assert word in error[0], (proc.args, error[0])


def test_a_wrong_database_url_is_a_clear_error() -> None:
    # refused before a stdio server starts serving, as by every command: `run` in a process, the rest here
    for command in (["run", "hi"], ["serve"], ["runs"]):
        start = functools.partial(cli, stdin="") if command[0] == "run" else here
        proc = start(*command, "--database-url", "mysql://db/runs")
        assert_usage_error(proc, "unsupported database 'mysql'", "--database-url")
        relative = start(*command, "--database-url", "sqlite:///")
        assert_usage_error(relative, "needs a path")


def test_a_state_directory_that_is_a_file_or_under_one_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    # serve over stdio opens durable runs once it has answered initialize: it says why when the client leaves.
    # It is a process of its own (it serves this process's stdio); the other commands are refused at once, here.
    lines = stdio_lines(initialize(), INITIALIZED)
    for command in (["serve"], ["run", "hi"], ["serve", "--http", "--port", "1"], ["runs"]):
        start = functools.partial(cli, stdin=lines) if command == ["serve"] else here
        proc = start(*command, "--state-dir", str(blocker))
        assert_usage_error(proc, f"the state directory {blocker} is not a directory", "--state-dir")
        under = start(*command, "--state-dir", str(blocker / "state"))
        said = f"{blocker / 'state'} cannot be created: {blocker} is not a directory"
        assert_usage_error(under, said, "--state-dir")
        # Put there by --database-url: the fix is the URL, not --state-dir
        url = start(*command, "--database-url", f"sqlite:///{blocker}/runs.sqlite")
        assert_usage_error(url, f"the directory of --database-url {blocker} is not a directory", "--database-url")
        assert "--state-dir" not in url.stderr, command
        assert blocker.read_text() == "not a directory", command


def not_a_database(state: Path) -> None:
    (state / "runs.sqlite").write_bytes(bytes(range(256)) * 400)  # what a stray copy or a half download leaves


def damaged_database(state: Path) -> None:
    """A database whose schema reads, but whose run store's first table is garbage: SQLite says it only
    when a query reaches that page ("database disk image is malformed")."""
    db = state / "runs.sqlite"
    with closing(sqlite3.connect(db)) as conn:  # closed: the last connection moves the log into the file
        conn.execute("PRAGMA journal_mode=WAL")  # as every runs database is
        conn.execute("CREATE TABLE mcp_team_meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO mcp_team_meta VALUES ('schema_version', '1')")
        conn.commit()
        root = conn.execute("SELECT rootpage FROM sqlite_master").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with db.open("r+b") as file:
        file.seek((root - 1) * size)
        file.write(b"\xa5" * size)


@pytest.mark.parametrize("make", [not_a_database, damaged_database])
def test_a_file_that_is_no_database_or_a_damaged_one_is_a_clear_error(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    # `run` in a process of its own; the other commands here
    for command in (["run", "hi"], ["runs"], ["runs", "show", "x"], ["serve", "--http", "--port", "1"]):
        state = tmp_path / "-".join(command)
        state.mkdir()
        make(state)
        before = (state / "runs.sqlite").read_bytes()
        proc = (cli if command[0] == "run" else here)(*command, state=state)
        assert_usage_error(proc, f"{state / 'runs.sqlite'}", "move it aside", "--state-dir")
        assert "file is not a database" in proc.stderr or "malformed" in proc.stderr, (command, proc.stderr)
        assert (state / "runs.sqlite").read_bytes() == before, command


def test_a_database_from_a_newer_version_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    first = cli("run", "--quiet", "Write a haiku", state=tmp_path)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "runs.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mcp_team_meta SET value = '99' WHERE key = 'schema_version'")
    before = dump(db)
    for command in (["run", "Write a haiku"], ["runs"], ["serve", "--http", "--port", "1"]):
        proc = (cli if command[0] == "run" else here)(*command, state=tmp_path)  # `run` in a process, the rest here
        assert_usage_error(proc, "written by a newer mcp-team", "Upgrade mcp-team", "Nothing was changed")
    assert dump(db) == before
    with sqlite3.connect(db) as conn:
        records = [json.loads(r) for (r,) in conn.execute("SELECT record FROM mcp_team_runs")]
    assert [r["status"] for r in records] == ["complete"]


@pytest.mark.parametrize("make", [not_a_database, damaged_database])
def test_a_stdio_server_answers_calls_with_what_is_wrong_with_its_database(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """Started by a client such as Claude Desktop: initialize is answered before durable runs open, so the
    problem reaches the user as the tool call's error; the log and the exit code say it too."""
    make(tmp_path)
    proc = subprocess.Popen([MCP_TEAM, "serve"], env=clean_env(MCP_TEAM_MODEL="offline",
                            MCP_TEAM_STATE_DIR=str(tmp_path)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(stdio_lines(initialize(), INITIALIZED, call(2, "run_team", request="Write a haiku")))
        proc.stdin.flush()
        assert "result" in answer(proc.stdout, 1)
        first = answer(proc.stdout, 2)["result"]
        proc.stdin.write(stdio_lines(call(3, "start_run", request="Write a haiku")))  # and every call after it
        proc.stdin.flush()
        later = answer(proc.stdout, 3)["result"]
        proc.stdin.close()  # the client leaves; the server says why it could not keep runs, and exits 2
        stderr = proc.stderr.read()
        assert proc.wait(timeout=HANG_GUARD) == 2, stderr
    finally:
        proc.kill()
        proc.wait()
    for result in (first, later):
        text = result["content"][0]["text"]
        assert result["isError"] and "durable runs are unavailable" in text, result
        assert str(tmp_path / "runs.sqlite") in text and "move it aside" in text and "--state-dir" in text, text
    assert_usage_error(subprocess.CompletedProcess([], 2, "", stderr), str(tmp_path / "runs.sqlite"), "move it aside")


def call(request_id: int, tool: str, **arguments: str) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def answer(stdout: IO[str], request_id: int) -> dict[str, Any]:
    """The server's answer to `request_id` (notifications before it are skipped); fails after the hang guard."""
    deadline = time.monotonic() + HANG_GUARD
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([stdout], [], [], left)[0]:
            break
        line = stdout.readline()
        assert line, "the server closed stdout without answering"
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id:
            return message
    raise AssertionError(f"no answer to request {request_id} within {HANG_GUARD} s")
