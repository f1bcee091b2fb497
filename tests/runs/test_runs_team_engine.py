"""The real engine under the run service: a K=8 fan-out of a `Team` (offline model with latency) killed with
SIGKILL mid-run and resumed by a new process with the same executor id. Every handoff gets its own results,
and no handoff the run store showed finished asks its model again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from mcp_team.handoffs import RunSettings, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs.team_engine import TeamEngine, team_hash
from mcp_team.specialists import DEFAULT_TEAM
from support import stored_finished, stored_runs
from support.stacks import communicate_or_stacks

pytestmark = [pytest.mark.process]

WORKER = Path(__file__).parents[1] / "support" / "team_worker.py"
K = 8


def _start(state: Path, mode: str, *extra: str) -> subprocess.Popen[str]:
    # 1 s calls: the even workers (one call) show finished in the run store (written within its flush interval)
    # while the odd ones (two calls) still run
    args = [sys.executable, str(WORKER), str(state), mode, "run-1", str(K), "1.0", str(state / "calls.log"), *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _calls(state: Path) -> list[dict[str, str]]:
    log = state / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = communicate_or_stacks(proc, 80)  # within the test's 120 s, to see its stacks
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result; stderr:\n{err[-3000:]}"
    record: dict[str, object] = json.loads(lines[-1][7:])
    return record


@pytest.mark.parametrize("mode", ["adaptive", "planned"])
def test_a_team_fan_out_killed_mid_run_resumes_and_each_handoff_gets_its_own_results(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "runs.sqlite"
    first = _start(tmp_path, "start", mode)
    while len(stored_finished(db)) < K // 2:  # the even workers finished, the odd ones still running
        assert first.poll() is None, first.communicate()
        time.sleep(0.005)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished = stored_finished(db)
    assert len(finished) < K, "every handoff had finished before the kill; nothing was tested"
    ran = {h["target"]: (h["started_at"], h["ended_at"]) for r in stored_runs(db) for h in r["result"]["handoffs"]
           if h["status"] == "completed"}  # fmt: skip
    record = _result(_start(tmp_path, "resume"))
    assert record["status"] == "complete", record.get("reason")
    result = record["result"]
    assert isinstance(result, dict)
    outputs = {h["target"]: h["output"] for h in result["handoffs"] if h["status"] == "completed"}
    assert set(outputs) == {f"w{i}" for i in range(1, K + 1)}
    for target, output in outputs.items():  # its own answer and its own tool result, not another branch's
        assert output.startswith(f"[offline {target}] Notes on:"), (target, output)
        assert ("6*7 = 42" in output) == (int(target[1:]) % 2 == 1), (target, output)
    # the handoffs replayed from their stored steps keep the times they ran at, not the replay's milliseconds
    times = {h["target"]: (h["started_at"], h["ended_at"]) for h in result["handoffs"]}
    assert all(times[target] == ran[target] for target in ran), (times, ran)
    calls = _calls(tmp_path)
    first_pid = calls[0]["pid"]
    again = {c["member"] for c in calls if c["pid"] != first_pid}
    assert not again & finished, f"finished handoffs asked their model again: {again & finished}"
    assert again, "the second process called no model: the run did not resume"


def test_a_run_resumed_after_its_deadline_would_have_passed_finishes_its_work(tmp_path: Path) -> None:
    """The deadline counts from the resume: counted from the first start, a run resumed late ended at once,
    `failed`, before it replayed (and so recorded) the handoffs it had finished."""
    db = tmp_path / "runs.sqlite"
    began = time.monotonic()
    first = _start(tmp_path, "start", "adaptive", "8")
    while len(stored_finished(db)) < K // 2:
        assert first.poll() is None, first.communicate()
        time.sleep(0.005)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished = stored_finished(db)
    time.sleep(max(0.0, began + 8.5 - time.monotonic()))  # the run's 8 s have passed since it started
    record = _result(_start(tmp_path, "resume", "adaptive", "8"))
    assert record["status"] == "complete", record.get("reason")
    result = record["result"]
    assert isinstance(result, dict) and not result["stopped_by"], result["stopped_by"]
    done = {h["target"] for h in result["handoffs"] if h["status"] == "completed"}
    assert done == {f"w{i}" for i in range(1, K + 1)} and finished <= done


@pytest.mark.anyio
async def test_a_server_takes_over_the_runs_of_a_dead_process_on_the_same_state_dir(tmp_path: Path) -> None:
    """Two processes on one SQLite state dir: the one killed (executor id worker-1) left its run pending; the live
    server (server-0) resumes it without waiting for a process with its id (it stayed running for ever)."""
    from mcp_team.runs import open_runs, resolve
    from support import team_worker

    db = tmp_path / "runs.sqlite"
    first = _start(tmp_path, "start", "adaptive")
    while len(stored_finished(db)) < K // 2:
        assert first.poll() is None, first.communicate()
        await anyio.sleep(0.005)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    finished = stored_finished(db)
    assert len(finished) < K, "every handoff had finished before the kill; nothing was tested"
    engine = TeamEngine(team_worker.team(K, 1.0, str(tmp_path / "calls.log")))
    config = resolve(state_dir=tmp_path, executor_id="server-0", environ={})
    async with open_runs(config, engine, adopt_orphans=True) as runs:
        record = await runs.wait("run-1", timeout=60)
    assert record is not None and record.status == "complete", record
    assert record.result is not None and {h.target for h in record.result.handoffs} == {
        f"w{i}" for i in range(1, K + 1)
    }
    again = {c["member"] for c in _calls(tmp_path) if c["pid"] == os.getpid()}
    assert again and not again & finished, f"finished handoffs asked their model again: {again & finished}"


def test_the_team_hash_follows_prompts_tools_settings_and_models() -> None:
    base = Team(ModelSet.single(OfflineModel()), DEFAULT_TEAM, RunSettings())
    same = Team(ModelSet.single(OfflineModel()), DEFAULT_TEAM, RunSettings())
    assert team_hash(base) == team_hash(same) == TeamEngine(base).team_hash
    prompt = [DEFAULT_TEAM[0].model_copy(update={"system_prompt": "other"}), *DEFAULT_TEAM[1:]]
    others = [
        Team(base.models, prompt, RunSettings()),
        Team(base.models, DEFAULT_TEAM[1:], RunSettings()),
        Team(base.models, DEFAULT_TEAM, RunSettings(max_retries=0)),
        Team(ModelSet.single(OfflineModel(name="other")), DEFAULT_TEAM, RunSettings()),
    ]
    hashes = {team_hash(t) for t in others}
    assert len(hashes) == len(others) and team_hash(base) not in hashes


def test_a_durable_team_keeps_the_limits_and_members_of_its_models() -> None:
    member = OfflineModel(name="own")
    models = ModelSet.single(OfflineModel(), max_concurrency=3)
    models.members = {"researcher": member}
    durable = TeamEngine(Team(models, DEFAULT_TEAM)).durable.models
    assert durable.limits is models.limits
    assert durable.members["researcher"].name == "own" and durable.members["researcher"] is not member
    assert durable.limiter_for(durable.for_role("specialist")) is models.limiter_for(models.for_role("specialist"))
