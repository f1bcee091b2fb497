"""Kill -9 of `mcp-team serve` in the middle of a run, then a restart: the run completes, and the offline
model's call log proves that no handoff the run store showed finished asked its model again. A K=4 fan-out,
a planned DAG (gatherers, then the writer, then the reviewer), and `mcp-team runs` reading the result."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import (
    HANG_GUARD,
    INITIALIZED,
    MCP_TEAM,
    clean_env,
    cli_here,
    initialize,
    plain_http,
    serve_http_process,
    stdio_lines,
    stored_finished,
    stored_runs,
)

pytestmark = [pytest.mark.process]

LAUNCHER = str(Path(__file__).parents[1] / "support" / "logged_serve.py")
# w1 calls its calculator before answering (two model calls), the others answer at once (one): w1 is still
# running when the others have finished.
FOUR = "\n".join(
    f'[[specialists]]\nname = "w{i}"\ndescription = "Worker {i}."\nprompt = "You are worker {i}."\n'
    + ('tools = ["calculate"]\n' if i == 1 else "")
    for i in range(1, 5)
)
DAG_REQUEST = "Research bees, calculate 2+2, write a short report and review it"


def _serve(state: Path, *args: str, **env_extra: str) -> subprocess.Popen[str]:
    log = str(state / "calls.log")
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="600", MCP_TEAM_STATE_DIR=str(state),
                    MCP_TEAM_TEST_CALL_LOG=log, **env_extra)  # fmt: skip
    proc = subprocess.Popen([sys.executable, LAUNCHER, "serve", *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    return proc


def _send(proc: subprocess.Popen[str], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(stdio_lines(*messages))
    proc.stdin.flush()


def _start_run(proc: subprocess.Popen[str], request: str, **extra: Any) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "start_run", "arguments": {"request": request, **extra}}}  # fmt: skip
    _send(proc, initialize(), INITIALIZED, call)


def _final(db: Path) -> dict[str, Any] | None:
    return next((r for r in stored_runs(db) if r["status"] != "running"), None)


def _wait(proc: subprocess.Popen[Any], what: str, done: Any) -> Any:
    deadline = time.monotonic() + HANG_GUARD
    while not (value := done()):
        assert proc.poll() is None, f"serve exited while waiting for {what}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"hang guard: still waiting for {what}"
        # Each poll reads and parses every record: every 10 ms, that was a fifth of this module's CPU. Model
        # calls take 600 ms, so what a kill must come before is hundreds of ms after what it waits for.
        time.sleep(0.05)
    return value


def _kill_and_resume(tmp_path: Path, request: str, finished: int, *args: str, **extra: Any) -> dict[str, Any]:
    """Start the run, kill -9 the server once the store shows `finished` handoffs completed, restart it, and return
    the final record, with what the store showed before the kill (`seen_before_kill`: what a client reading the run
    then saw) and after it (`finished_at_kill`: a loaded machine may kill later than asked, so more may have
    finished by then); the call log's `pids` (before the kill, after it)."""
    db = tmp_path / "runs.sqlite"
    first = _serve(tmp_path, *args)
    _start_run(first, request, **extra)

    def enough() -> set[str] | None:
        done = stored_finished(db)
        return done if len(done) >= finished else None

    seen = _wait(first, "finished handoffs", enough)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished_at_kill = stored_finished(db)
    recorded = _recorded_model_steps(db)
    assert [r["status"] for r in stored_runs(db)] == ["running"], "the run ended before the kill: nothing was tested"
    second = _serve(tmp_path, *args)
    _send(second, initialize(), INITIALIZED)  # a client connects; the run resumes without being asked for
    try:
        record = _wait(
            second, "the resumed run", lambda: next((r for r in stored_runs(db) if r["status"] != "running"), None)
        )
    finally:
        second.kill()
        second.communicate()
    assert record["status"] == "complete", record.get("reason")
    calls = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    again = [c for c in calls if c["pid"] == second.pid]
    assert again, "the restarted server called no model: the run was not resumed"
    rerun = {c["member"] for c in again} & finished_at_kill
    assert not rerun, f"handoffs that had finished asked their model again: {rerun}"
    repeated = [(c["member"], c["phase"]) for c in again if c["digest"] in recorded]
    assert not repeated, f"model calls recorded before the kill were made again: {repeated}"
    record.update(seen_before_kill=seen, finished_at_kill=finished_at_kill, pids=(first.pid, second.pid))
    return record


def _recorded_model_steps(db: Path) -> set[str]:
    """Digests of the model steps DBOS has recorded (`model:<model>:<digest>`, the call log's `digest`)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT function_name FROM operation_outputs WHERE function_name LIKE 'model:%'")
        return {name.rsplit(":", 1)[1] for (name,) in rows}


def test_a_fan_out_killed_mid_run_completes_after_a_restart(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(FOUR, encoding="utf-8")
    record = _kill_and_resume(tmp_path, "Each of you: compute 6*7 and report.", 3, "--team", str(team))
    # killed once the one-call workers were seen finished, while w1 (two calls) went on; under load the kill may land
    # after w1 finished too: what counts is what was stored when it landed
    assert {"w2", "w3", "w4"} <= record["seen_before_kill"] <= record["finished_at_kill"]
    outputs = {h["target"]: h["output"] for h in record["result"]["handoffs"] if h["status"] == "completed"}
    assert set(outputs) == {"w1", "w2", "w3", "w4"}
    for target, output in outputs.items():  # each its own answer
        assert output.startswith(f"[offline {target}] Notes on:"), (target, output)
    assert "6*7 = 42" in outputs["w1"]
    calls = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    w1 = [c["pid"] for c in calls if c["member"] == "w1"]
    before, after = record["pids"]
    if "w1" in record["finished_at_kill"]:  # both its calls made before the kill, none after
        assert w1 == [before, before], w1
    else:  # its first call (recorded) is not asked again; its second, in flight at the kill, is made after it
        assert w1[0] == before and w1[-1] == after and w1.count(after) == 1, w1


def test_a_planned_dag_killed_after_its_first_tasks_completes_after_a_restart(tmp_path: Path) -> None:
    record = _kill_and_resume(tmp_path, DAG_REQUEST, 2, mode="planned")
    # the gatherers seen finished; the writer in flight at the kill, or finished too when it landed late
    assert {"researcher", "analyst"} <= record["seen_before_kill"] <= record["finished_at_kill"]
    assert [h["target"] for h in record["result"]["handoffs"]] == ["researcher", "analyst", "writer", "reviewer"]
    assert record["result"]["plan"] is not None


def test_a_run_team_call_cut_by_sigterm_leaves_its_run_to_resume(tmp_path: Path) -> None:
    """SIGTERM (what hosts, systemd and Docker send) stops the server, not the client: the run of a `run_team`
    call it cuts is not cancelled (it was, "by the client", for good) but resumes at the next start."""
    db = tmp_path / "runs.sqlite"
    team = tmp_path / "team.toml"
    team.write_text(FOUR, encoding="utf-8")
    first = _serve(tmp_path, "--team", str(team))
    request = {"request": "Each of you: compute 6*7 and report."}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_team", "arguments": request}}
    _send(first, initialize(), INITIALIZED, call)
    _wait(first, "finished handoffs", lambda: len(stored_finished(db)) >= 3)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=HANG_GUARD)
    assert [r["status"] for r in stored_runs(db)] == ["running"], [(r["status"], r["reason"]) for r in stored_runs(db)]
    second = _serve(tmp_path, "--team", str(team))
    _send(second, initialize(), INITIALIZED)
    try:
        record = _wait(second, "the resumed run", lambda: _final(db))
    finally:
        second.kill()
        second.communicate()
    assert record["status"] == "complete", record.get("reason")


def test_over_http_too_a_run_team_call_cut_by_sigterm_leaves_its_run_to_resume(tmp_path: Path) -> None:
    import threading

    import httpx2

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    db = tmp_path / "runs.sqlite"
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="600", MCP_TEAM_STATE_DIR=str(tmp_path))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_team", "arguments": {"request": DAG_REQUEST}}}  # fmt: skip
    with serve_http_process(env=env) as (base, proc), plain_http(timeout=HANG_GUARD) as http:
        init = http.post(f"{base}/mcp", json=initialize(), headers=headers)
        session = {**headers, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)

        answers: list[str] = []

        def hold() -> None:  # the client holding the call open; the server answers it as it stops
            with contextlib.suppress(httpx2.HTTPError):
                answers.append(http.post(f"{base}/mcp", json=call, headers=session).text)

        holding = threading.Thread(target=hold)
        holding.start()
        _wait(proc, "a finished handoff", lambda: stored_finished(db))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG_GUARD)
        holding.join(timeout=HANG_GUARD)
    assert [r["status"] for r in stored_runs(db)] == ["running"], [(r["status"], r["reason"]) for r in stored_runs(db)]
    # The caller is told where its run went (its stream ended with no answer and no run id).
    run_id = stored_runs(db)[0]["run_id"]
    assert answers and f"the server is stopping: run {run_id} is kept and goes on when it starts again" in answers[0]
    assert '"isError":true' in answers[0].replace(" ", ""), answers[0]
    with serve_http_process(env=env) as (_, proc):
        record = _wait(proc, "the resumed run", lambda: _final(db))
    assert record["status"] == "complete", record.get("reason")


def test_mcp_team_runs_lists_shows_and_cancels(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path))
    run = subprocess.run([MCP_TEAM, "run", "--quiet", "Write a haiku"], env=env, capture_output=True, text=True,
                         timeout=HANG_GUARD)  # fmt: skip
    assert run.returncode == 0, run.stderr
    run_id = run.stderr.split("mcp-team: run ", 1)[1].split()[0]
    listed = subprocess.run([MCP_TEAM, "runs"], env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert listed.returncode == 0 and listed.stdout.startswith(f"{run_id}  complete"), listed

    # The other actions in this process (`support.cli_here`): what is checked is their output and exit code
    # (`mcp-team runs` above is the real process), and a process each cost a second of start-up.
    shown = cli_here("runs", "show", run_id, "--json", MCP_TEAM_STATE_DIR=str(tmp_path))
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "complete", shown
    cancel = cli_here("runs", "cancel", run_id, MCP_TEAM_STATE_DIR=str(tmp_path))
    assert cancel.returncode == 0 and "had already ended (complete); nothing to cancel" in cancel.stderr, cancel
    assert "Traceback" not in cancel.stderr
    missing = cli_here("runs", "show", "nope", MCP_TEAM_STATE_DIR=str(tmp_path))
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr, missing


def _records_of(db: Path) -> list[dict[str, Any]]:
    return [h for r in stored_runs(db) for h in (r.get("result") or {}).get("handoffs", [])]


def test_a_run_stopped_between_a_failed_handoff_and_its_retry_completes_after_a_restart(tmp_path: Path) -> None:
    """w1's first attempt fails; the server is killed once the store shows the failure, before the retry has
    finished. After the restart the failed attempt is not run again: the retry goes on and the run completes."""
    team = tmp_path / "team.toml"
    team.write_text(FOUR, encoding="utf-8")
    db = tmp_path / "runs.sqlite"
    fail = {"MCP_TEAM_TEST_FAIL_FIRST": "w1"}
    first = _serve(tmp_path, "--team", str(team), **fail)
    _start_run(first, "Each of you: compute 6*7 and report.")
    _wait(first, "w1's failed attempt", lambda: any(h["target"] == "w1" and h["status"] == "failed"
                                                     for h in _records_of(db)))  # fmt: skip
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert not any(h["target"] == "w1" and h["status"] == "completed" for h in _records_of(db)), "retry done already"
    done_before = {h["target"] for h in _records_of(db) if h["status"] == "completed"}
    second = _serve(tmp_path, "--team", str(team), **fail)
    _send(second, initialize(), INITIALIZED)
    try:
        record = _wait(
            second, "the resumed run", lambda: next((r for r in stored_runs(db) if r["status"] != "running"), None)
        )
    finally:
        second.kill()
        second.communicate()
    assert record["status"] == "complete", record.get("reason")
    w1 = [h for h in record["result"]["handoffs"] if h["target"] == "w1"]
    assert [(h["attempt"], h["status"]) for h in w1] == [(1, "failed"), (2, "completed")], w1
    assert "6*7 = 42" in w1[1]["output"]
    calls = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    failed = [c for c in calls if c.get("failed")]
    assert len(failed) == 1 and failed[0]["pid"] == first.pid  # the failed attempt was not run again
    # nor any handoff that had finished: only calls in flight at the kill run again (at least once)
    assert [c["member"] for c in calls if c["pid"] == second.pid and c["member"] in done_before] == []
