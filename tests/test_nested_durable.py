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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from mcp_team.handoffs import RunSettings, Team
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.specialists import Specialist, gather_concurrently

WORKER = Path(__file__).parent / "nested_team_worker.py"


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


@pytest.mark.parametrize("depth", [2, 3])
def test_a_team_tree_killed_inside_a_sub_run_resumes_with_each_handoffs_own_results(tmp_path: Path, depth: int) -> None:
    deepest = "abc"[depth - 1]
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
    teams = ["", "team_b/", "team_b/team_c/"][:depth]
    expected = {f"{teams[level]}{'abc'[level]}{i}" for level in range(depth) for i in (1, 2)}
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


def test_a_tree_deeper_than_a_durable_run_numbers_fails_at_once_saying_what_to_change(tmp_path: Path) -> None:
    proc = _start(tmp_path, "start", 4)  # allowed by a team file with max_team_depth = 4
    out, err = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result; stderr:\n{err[-3000:]}"
    record = json.loads(lines[-1][7:])
    assert record["status"] == "failed"
    assert "nest 4 deep" in record["reason"] and "--ephemeral" in record["reason"], record["reason"]
    assert _calls(tmp_path) == []  # refused before any model call


T = TypeVar("T")
PATH: ContextVar[tuple[int, ...]] = ContextVar("path", default=())


class Paths:
    """A `Runtime` noting the path of every branch entered (a branch inside a branch nests, as in DBOS's)."""

    def __init__(self) -> None:
        self.entered: list[tuple[int, ...]] = []

    @contextmanager
    def branch(self, seq: int) -> Iterator[None]:
        path = (*PATH.get(), seq)
        self.entered.append(path)
        token = PATH.set(path)
        try:
            yield
        finally:
            PATH.reset(token)

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
    runtime = Paths()
    result = anyio.run(lambda: team.run("Each of you: compute 6*7 and report.", runtime=runtime))
    attempts = [(h.id, h.status) for h in result.handoffs if h.target == "team_b"]
    assert attempts == [("h2", "failed"), ("h2.2", "completed")]
    inside = [p for p in runtime.entered if p[:1] == (2,) and len(p) == 2]
    assert inside == [(2, 1), (2, 2)]  # attempt 1's b1, then attempt 2's: never the same branch twice
