"""Kill -9 and replay: a K=8 fan-out of branches (several model steps, a gather of tool steps, a decision)
killed mid-run, restarted with the same executor id: every branch gets its own results, and no call whose
result was recorded runs again (only calls in flight at the kill may). Also an upgrade (a run left pending
by an older release that records runs the same way resumes) and a changed team (interrupted, kept)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_team.runs.config import REPLAY_FORMAT
from support import stored_finished
from support.fan_out_worker import (
    CALLS,
    WORKER,
    K,
    check_branches,
    kill_after,
    logged_calls,
    result_of,
    start_worker,
)

pytestmark = [pytest.mark.process]


def _recorded_calls(db: Path) -> set[str]:
    """The calls whose results DBOS had saved (read straight from its table, as a kill left it)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT output FROM operation_outputs WHERE output IS NOT NULL").fetchall()
    calls = set()
    for (output,) in rows:
        text = json.dumps(json.loads(output))
        for token in text.replace('"', " ").split():
            if token.startswith("tool:") and token.count(":") == 2:
                calls.add("tool " + " ".join(token.split(":")[1:]))
        if "ans:" in text:
            value = json.loads(output)
            calls.add(value["v"]["content"][0]["text"].removeprefix("ans:"))
    return calls


@pytest.mark.parametrize("kill_at", [10, 27, 44])
def test_fan_out_killed_mid_run_resumes_with_each_branch_its_own_results(tmp_path: Path, kill_at: int) -> None:
    log = tmp_path / "calls.log"
    first = start_worker(tmp_path, log, "start")
    done_before = kill_after(first, log, kill_at)
    assert done_before < CALLS, "the run finished before the kill; nothing was tested"
    recorded = _recorded_calls(tmp_path / "runs.sqlite")
    assert recorded, "nothing was recorded before the kill"
    record = result_of(start_worker(tmp_path, log, "resume"))
    assert record["status"] == "complete", record.get("reason")
    check_branches(record)
    calls = logged_calls(log)
    counts = collections.Counter(c["call"] for c in calls)
    assert set(counts) == {c["call"] for c in calls} and len(counts) == CALLS
    reran = [call for call, n in counts.items() if n > 1]
    # at-least-once: no call whose result was recorded ran again; only calls in flight at the kill
    # (finished, result not yet saved) may, at most the 2 concurrent tool calls of each branch
    assert not set(reran) & recorded, set(reran) & recorded
    second = {c["call"] for c in calls if c["pid"] != calls[0]["pid"]}
    assert not second & recorded
    assert len(reran) <= 2 * K, reran
    first_pid = calls[0]["pid"]
    assert all(next(c for c in calls if c["call"] == r)["pid"] == first_pid for r in reran)
    assert sum(n for n in counts.values()) - len(counts) == len(reran)


def test_a_run_left_by_an_older_release_that_records_runs_the_same_way_resumes(tmp_path: Path) -> None:
    # DBOS resumes only the workflows of the application version that runs: it names the replay format, not the
    # release, so an upgrade that records runs the same way goes on with the runs the older release left.
    log = tmp_path / "calls.log"
    kill_after(start_worker(tmp_path, log, "start", env={"MCP_TEAM_TEST_RELEASE": "0.0.9"}), log, 20)
    record = result_of(start_worker(tmp_path, log, "resume"))
    assert record["status"] == "complete", record.get("reason")
    assert record["app_version"] == f"mcp-team.r{REPLAY_FORMAT}"
    resumed = record["resumed"]
    assert isinstance(resumed, list) and [r["how"] for r in resumed] == ["restart"], resumed
    check_branches(record)
    counts = collections.Counter(c["call"] for c in logged_calls(log))
    assert len([n for n in counts.values() if n > 1]) <= 2 * K


def test_a_run_of_another_replay_format_is_interrupted_with_its_finished_handoffs(tmp_path: Path) -> None:
    log, db = tmp_path / "calls.log", tmp_path / "runs.sqlite"
    # slow calls: the store's record (written within its flush interval) shows finished handoffs while
    # the run still goes (its synthesis call takes a second)
    first = start_worker(tmp_path, log, "start", "0.0.9.r0", latency=1.0)
    while not (finished := stored_finished(db, "id")):
        assert first.poll() is None, first.communicate()
        time.sleep(0.005)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished = stored_finished(db, "id")  # a handoff may have finished between the read and the kill
    record = result_of(start_worker(tmp_path, log, "resume", "0.1.0.r1"))
    assert record["status"] == "interrupted"
    assert "records runs differently" in str(record["reason"])
    result = record["result"]
    assert isinstance(result, dict)
    assert finished <= {h["id"] for h in result["handoffs"] if h["status"] == "completed"}


def test_a_run_whose_team_changed_is_interrupted_not_replayed(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    kill_after(start_worker(tmp_path, log, "start"), log, 30)
    before = len(logged_calls(log))
    record = result_of(start_worker(tmp_path, log, "resume", "", "another-team"))
    assert record["status"] == "interrupted"
    assert "team changed" in str(record["reason"])
    assert len(logged_calls(log)) == before  # nothing ran against the other team


def test_a_run_is_cancelled_from_another_process(tmp_path: Path) -> None:
    import anyio

    from mcp_team.runs import open_runs, resolve
    from support.durable_engine import FakeEngine

    args = [sys.executable, str(WORKER), str(tmp_path), "start", "run-x", "2", "2", "3600", str(tmp_path / "log")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "STARTED"

    async def cancel() -> None:
        async with open_runs(resolve(state_dir=tmp_path, executor_id="other", environ={}), FakeEngine()) as runs:
            cancelled = await runs.cancel("run-x")
            assert cancelled is not None and cancelled.status == "cancelled"

    anyio.run(cancel)
    record = result_of(proc)  # the owner noticed, stopped its in-flight calls and wrote its own final record
    assert record["status"] == "cancelled"
    assert record["executor_id"] == "worker-1"
