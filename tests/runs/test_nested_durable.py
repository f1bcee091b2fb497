"""Teams inside teams under the durable runtime (issues 9 and 13): a run whose members are teams, two and
three levels deep, killed with SIGKILL while a sub-run is under way and resumed by a new process. Every
handoff at every level gets its own results, and no model call whose result DBOS had saved is asked again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from mcp_team.handoffs import RunSettings, Team
from mcp_team.handoffs.runtime import Branch
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.specialists import Specialist, gather_concurrently

pytestmark = [pytest.mark.process]

WORKER = Path(__file__).parents[1] / "support" / "nested_team_worker.py"


def _start(state: Path, mode: str, depth: int) -> subprocess.Popen[str]:
    args = [sys.executable, str(WORKER), str(state), mode, "run-1", str(depth), "0.2", str(state / "calls.log")]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _calls(state: Path) -> list[dict[str, Any]]:
    log = state / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _saved_calls(db: Path) -> set[str]:
    """Digests of the model calls whose results DBOS had saved when the process died (as the kill left them)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT function_name FROM operation_outputs WHERE function_name LIKE 'model:%' AND error IS NULL"
        ).fetchall()
    return {name.rsplit(":", 1)[1] for (name,) in rows}


def _leaves(result: dict[str, Any], path: str = "") -> dict[str, str]:
    """Each worker's output by its path in the tree; every team's sub-run walked."""
    outputs: dict[str, str] = {}
    for h in result["handoffs"]:
        assert h["status"] == "completed", (path, h["target"], h.get("error"))
        if h.get("subrun"):
            outputs |= _leaves(h["subrun"], f"{path}{h['target']}/")
        else:
            outputs[path + h["target"]] = h["output"]
    return outputs


@pytest.mark.parametrize("depth", [2, 3, 4])  # 4: deeper than the old step-id layout allowed
def test_a_team_tree_killed_inside_a_sub_run_resumes_with_each_handoffs_own_results(tmp_path: Path, depth: int) -> None:
    deepest = "abcd"[depth - 1]
    first = _start(tmp_path, "start", depth)
    # The deepest team's even worker answers in one call, its odd one is still at its second: kill then.
    while not any(c["member"] == f"{deepest}2" for c in _calls(tmp_path)):
        assert first.poll() is None, first.communicate()
        time.sleep(0.005)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    saved = _saved_calls(tmp_path / "runs.sqlite")
    before = len(_calls(tmp_path))

    second = _start(tmp_path, "resume", depth)
    out, err = second.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result; stderr:\n{err[-3000:]}"
    record = json.loads(lines[-1][7:])
    assert record["status"] == "complete", record.get("reason")

    leaves = _leaves(record["result"])
    teams = ["", "team_b/", "team_b/team_c/", "team_b/team_c/team_d/"][:depth]
    expected = {f"{teams[level]}{'abcd'[level]}{i}" for level in range(depth) for i in (1, 2)}
    assert set(leaves) == expected
    for path, output in leaves.items():  # its own answer and its own tool result, not another branch's
        name = path.rsplit("/", 1)[-1]
        assert output.startswith(f"[offline {name}] Notes on:"), (path, output)
        assert ("6*7 = 42" in output) == name.endswith("1"), (path, output)

    resumed = _calls(tmp_path)[before:]
    assert resumed, "the second process called no model: the run did not resume"
    assert {c["pid"] for c in resumed} == {second.pid}
    asked_again = {c["digest"] for c in resumed} & saved
    assert not asked_again, f"model calls whose results were saved were asked again: {asked_again}"


T = TypeVar("T")


class Keys:
    """A `Runtime` noting the key of every branch it runs (a durable runtime names its child workflow so)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def branches(self, work: Sequence[Branch]) -> None:
        self.keys += [b.key for b in work]
        async with anyio.create_task_group() as tg:
            for b in work:
                tg.start_soon(b.body)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        return await gather_concurrently(calls)

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        return value()


def test_a_retried_sub_team_runs_its_new_sub_run_in_branches_of_its_own() -> None:
    """team_b's only worker fails once, so its sub-run fails and the run retries team_b: the retry's sub-run
    must not number its handoff's branch like the first attempt's, or a replay would hand it those steps."""
    b1 = Specialist(name="b1", description="worker b1", system_prompt="You are b1.")
    team_b = SubTeam(name="team_b", description="team b", system_prompt="You lead team b.", members=(b1,),
                     settings=RunSettings(max_retries=0))  # fmt: skip
    a1 = Specialist(name="a1", description="worker a1", system_prompt="You are a1.")
    team = Team(ModelSet.single(FaultyModel(OfflineModel(), parse_faults("server_error:b1:1"))), [a1, team_b])
    runtime = Keys()
    result = anyio.run(lambda: team.run("Each of you: compute 6*7 and report.", runtime=runtime, run_id="r"))
    attempts = [(h.id, h.status) for h in result.handoffs if h.target == "team_b"]
    assert attempts == [("h2", "failed"), ("h2.2", "completed")]
    # team_b's branch (its retry runs in it, after the first attempt), then each attempt's sub-run's own branch
    assert [k for k in runtime.keys if k.startswith("r/h2")] == ["r/h2", "r/h2/h1", "r/h2.2/h1"], runtime.keys
    assert len(set(runtime.keys)) == len(runtime.keys)  # never one branch key twice: each names its own workflow
