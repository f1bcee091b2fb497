"""A cancel's first half alone (the run's record, not its DBOS workflow), on a server with a run at a checkpoint."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from mcp_team.runs.database import sqlite_engine
from mcp_team.runs.records import Progress
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, initialize, stdio_lines, stored_runs

T = TypeVar("T")

REQUEST = "Research bees, calculate 2+2, write a short report and review it"  # gatherers, writer, reviewer
# The run waits for a person before the writer: it cannot end on its own while the test cancels it, however slow
# the machine.
CHECKPOINTS = '[supervisor]\ncheckpoints = ["before:writer"]\n'
FIRST_REASON = "cancelled with mcp-team runs cancel"  # what the cancel whose DBOS half failed recorded


def serve_run(state: Path) -> subprocess.Popen[str]:
    """`mcp-team serve` (stdio) keeping its runs in `state`, on the default team with CHECKPOINTS, with a run of
    REQUEST started on it."""
    team = state / "team.toml"
    subprocess.run([MCP_TEAM, "init", str(team)], check=True, env=clean_env(), capture_output=True, timeout=HANG_GUARD)
    team.write_text(team.read_text().replace("[supervisor]\n", CHECKPOINTS, 1))
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="100", MCP_TEAM_STATE_DIR=str(state))
    proc = subprocess.Popen([MCP_TEAM, "serve", "--team", str(team)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _send(proc, initialize(), INITIALIZED, _tool_call(2, "start_run", request=REQUEST))
    return proc  # stdin stays open: the server serves until the test kills it


def _tool_call(request_id: int, tool: str, **arguments: str) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _send(proc: subprocess.Popen[str], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(stdio_lines(*messages))
    proc.stdin.flush()


def waiting_at(db: Path, checkpoint: str) -> str | None:
    """The id of the run whose record shows it waiting at `checkpoint`."""
    return next((r["run_id"] for r in stored_runs(db) if (r.get("waiting") or {}).get("name") == checkpoint), None)


async def until(proc: subprocess.Popen[str], what: str, value: Callable[[], T | None]) -> T:
    """`value()` once it is truthy, polled while the server lives (a hang guard, never a speed claim)."""
    with anyio.fail_after(HANG_GUARD):
        while not (found := value()):
            assert proc.poll() is None, f"serve exited while waiting for {what}: {proc.communicate()[1][-3000:]}"
            await anyio.sleep(0.02)
    return found


def workflow_status(db: Path, workflow_id: str) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM workflow_status WHERE workflow_uuid = ?", (workflow_id,)).fetchone()
    return row[0] if row else None


async def cancel_record_only(db: Path, run_id: str) -> dict[str, Any]:
    """The first half of a cancel, as `mcp-team runs cancel` writes it, without the second (DBOS's cancel)."""
    store = RunStore(sqlite_engine(str(db)))
    try:
        record = store.get(run_id)
        assert record is not None and record.status == "running"
        assert await store.finish_if_running(Progress(record).finish("cancelled", reason=FIRST_REASON))
    finally:
        store.engine.dispose()
    return next(r for r in stored_runs(db) if r["run_id"] == run_id)


def rewritten(db: Path, written: dict[str, Any]) -> dict[str, Any] | None:
    """The run's record once a write after `written` (the process running it ending it) has replaced it."""
    return next((r for r in stored_runs(db) if r["run_id"] == written["run_id"] and r != written), None)


def cancel_with_the_cli(state: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(MCP_TEAM_STATE_DIR=str(state))
    return subprocess.run([MCP_TEAM, "runs", "cancel", run_id], env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD)  # fmt: skip
