"""A cancel left half done is finished by cancelling again. Cancelling a run another process runs is two writes:
the run's record (cancelled), then its DBOS workflow. When the second fails (a locked database, the canceller
killed in between), a live process running the run finishes it itself (tests/runs/test_cancel_lost.py). When none
does, a restart does not run such a workflow again, and cancelling again with `mcp-team runs cancel` cancels it.
The helpers here (a server with a run waiting at a checkpoint, the first half of a cancel) serve both files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.database import sqlite_engine
from mcp_team.runs.records import Progress
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.types import RunRequest
from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, initialize, stdio_lines, stored_runs
from support.durable_engine import FakeEngine

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]
T = TypeVar("T")

REQUEST = "Research bees, calculate 2+2, write a short report and review it"  # gatherers, writer, reviewer
# The run waits for a person before the writer: it cannot end on its own while the test cancels it, however slow
# the machine.
CHECKPOINTS = '[supervisor]\ncheckpoints = ["before:writer"]\n'
FIRST_REASON = "cancelled with mcp-team runs cancel"  # what the cancel whose DBOS half failed recorded


def _serve(state: Path) -> subprocess.Popen[str]:
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


def _waiting_at(db: Path, checkpoint: str) -> str | None:
    """The id of the run whose record shows it waiting at `checkpoint`."""
    return next((r["run_id"] for r in stored_runs(db) if (r.get("waiting") or {}).get("name") == checkpoint), None)


async def _until(proc: subprocess.Popen[str], what: str, value: Callable[[], T | None]) -> T:
    """`value()` once it is truthy, polled while the server lives (a hang guard, never a speed claim)."""
    with anyio.fail_after(HANG_GUARD):
        while not (found := value()):
            assert proc.poll() is None, f"serve exited while waiting for {what}: {proc.communicate()[1][-3000:]}"
            await anyio.sleep(0.02)
    return found


def _workflow_status(db: Path, workflow_id: str) -> str | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT status FROM workflow_status WHERE workflow_uuid = ?", (workflow_id,)).fetchone()
    return row[0] if row else None


async def _cancel_record_only(db: Path, run_id: str) -> dict[str, Any]:
    """The first half of a cancel, as `mcp-team runs cancel` writes it, without the second (DBOS's cancel)."""
    store = RunStore(sqlite_engine(str(db)))
    try:
        record = store.get(run_id)
        assert record is not None and record.status == "running"
        assert await store.finish_if_running(Progress(record).finish("cancelled", reason=FIRST_REASON))
    finally:
        store.engine.dispose()
    return next(r for r in stored_runs(db) if r["run_id"] == run_id)


def _rewritten(db: Path, written: dict[str, Any]) -> dict[str, Any] | None:
    """The run's record once a write after `written` (the process running it ending it) has replaced it."""
    return next((r for r in stored_runs(db) if r["run_id"] == written["run_id"] and r != written), None)


def _cancel_with_the_cli(state: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(MCP_TEAM_STATE_DIR=str(state))
    return subprocess.run([MCP_TEAM, "runs", "cancel", run_id], env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD)  # fmt: skip


async def test_a_restart_does_not_run_a_workflow_whose_record_says_cancelled(tmp_path: Path) -> None:
    """The other way a half-done cancel could spend model calls: DBOS resumes the pending workflow at the next
    start. The run service finds its record finished and returns what it recorded, calling no model."""
    config = resolve(state_dir=tmp_path, environ={})
    async with open_runs(config, FakeEngine(k=2, steps=2, latency=3600.0)) as runs:
        # closing leaves it pending, to resume at the next start
        await runs.start(RunRequest(request="a request"), run_id="run-c")
    assert config.sqlite_path is not None
    half = await _cancel_record_only(config.sqlite_path, "run-c")
    assert _workflow_status(config.sqlite_path, "run-c") == "PENDING"

    engine = FakeEngine(k=2, steps=2)
    async with open_runs(config, engine) as runs:
        with anyio.fail_after(HANG_GUARD):
            # DBOS re-enqueues it at launch, then runs it: polled, as DBOS writes its state
            while _workflow_status(config.sqlite_path, "run-c") in ("PENDING", "ENQUEUED") or runs.running:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        assert engine.calls == 0
        record = await runs.get("run-c")
        assert record is not None and (record.status, record.reason) == ("cancelled", FIRST_REASON)
        assert record.model_dump(mode="json")["updated_at"] == half["updated_at"]  # left as the cancel wrote it
        # Its workflow ended with the recorded result: cancelling again touches neither.
        assert await runs.cancel("run-c") == record
    assert _workflow_status(config.sqlite_path, "run-c") == "SUCCESS"


async def test_a_cancel_whose_workflow_the_database_refused_says_so_and_cancelling_again_finishes_it(
    tmp_path: Path,
) -> None:
    config = resolve(state_dir=tmp_path, environ={})
    async with open_runs(config, FakeEngine(k=2, steps=2, latency=3600.0)) as runs:
        # closing leaves it pending, to resume at the next start
        await runs.start(RunRequest(request="a request"), run_id="run-r")
    db = config.sqlite_path
    assert db is not None
    with sqlite3.connect(db) as conn:  # DBOS's half of a cancel fails, the run store's does not
        conn.execute("CREATE TRIGGER refuse_cancel BEFORE UPDATE OF status ON workflow_status "
                     "WHEN NEW.status = 'CANCELLED' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")  # fmt: skip

    refused = _cancel_with_the_cli(tmp_path, "run-r")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused
    assert "run run-r is recorded cancelled, but the runs database refused to cancel its workflow" in refused.stderr
    assert "Run 'mcp-team runs cancel run-r' again" in refused.stderr
    assert [r["status"] for r in stored_runs(db)] == ["cancelled"]
    assert _workflow_status(db, "run-r") == "PENDING"

    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER refuse_cancel")
    done = _cancel_with_the_cli(tmp_path, "run-r")
    assert (done.returncode, done.stderr) == (0, "mcp-team: run run-r cancelled\n"), done
    assert _workflow_status(db, "run-r") == "CANCELLED"
    [record] = stored_runs(db)
    assert (record["status"], record["reason"]) == ("cancelled", FIRST_REASON)
