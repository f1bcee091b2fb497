"""A resumed run's record keeps what it had recorded finished (issue 32): its replay, which goes through the same
handoffs again in milliseconds from their recorded steps, never changes a finished handoff, at any depth of teams
inside the team. Here the replay is a second run of the same team on the same request and run id (the same
handoffs, new times), fed to the record (`runs.records.Progress`) as a resumed run's events are.

The kill matrix (tests/runs/test_matrix_kill.py) found it: a team's handoff finished before a kill kept its times, but
its sub-run came back with the replay's; and the sub-run's handoffs, shown finished by path while the team worked
(`h1/h1`), were drawn after the restart once the team's handoff finished."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_team.handoffs import HandoffRecord, RunEvent, RunResult, RunSettings, Team
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs.records import Progress
from mcp_team.runs.types import RunRecord, now
from mcp_team.specialists import Specialist

pytestmark = pytest.mark.anyio

REQUEST = "Ask the hive team to say hello"


def _team() -> Team:
    members = tuple(Specialist(name=n, description=f"worker {n}", system_prompt=f"You are {n}.") for n in ("a", "b"))
    hive = SubTeam(name="hive_team", description="a team of two", system_prompt="You lead.", members=members,
                   settings=RunSettings())  # fmt: skip
    return Team(ModelSet.single(OfflineModel(latency=0.01)), [hive])


async def _run(on_event: Callable[[RunEvent], None]) -> RunResult:
    async def sink(event: RunEvent) -> None:
        on_event(event)

    return await _team().run(REQUEST, on_event=sink, run_id="r")


def _record() -> RunRecord:
    at = now()
    return RunRecord(run_id="r", status="running", request=REQUEST, executor_id="x", resumable=True, started_at=at,
                     updated_at=at, executions=1)  # fmt: skip


async def _stored_when(stop: Callable[[dict[str, HandoffRecord]], bool]) -> RunRecord:
    """The record a first run had stored when `stop` first held for its progress (as a kill would leave it)."""
    progress = Progress(_record())
    stored: list[RunRecord] = []

    def on_event(event: RunEvent) -> None:
        progress.on_event(event)
        if not stored and stop(progress.handoffs):
            stored.append(progress.snapshot())

    await _run(on_event)
    assert stored, "the first run never reached the moment"
    return stored[0]


async def _resumed(stored: RunRecord) -> tuple[list[RunRecord], RunRecord]:
    """The record of the run resumed from `stored`: as its replay goes, and at its end."""
    progress = Progress(stored.model_copy(update={"executions": 2}))
    views: list[RunRecord] = []

    def on_event(event: RunEvent) -> None:
        progress.on_event(event)
        views.append(progress.snapshot())

    result = await _run(on_event)
    return views, progress.finish("complete", result)


def _done(h: HandoffRecord | None) -> bool:
    return h is not None and h.status == "completed"


async def test_a_sub_runs_handoffs_finished_before_a_restart_keep_their_records_while_the_team_goes_on() -> None:
    stored = await _stored_when(lambda hs: _done(hs.get("h1/h1")) and _done(hs.get("h1/h2")) and not _done(hs["h1"]))
    assert stored.result is not None
    before = {h.id: h for h in stored.result.handoffs}
    views, final = await _resumed(stored)
    for view in views:  # the progress shows them by path, as they were
        assert view.result is not None
        shown = {h.id: h for h in view.result.handoffs}
        assert shown["h1/h1"] == before["h1/h1"] and shown["h1/h2"] == before["h1/h2"]
    assert final.result is not None
    (team,) = final.result.handoffs
    assert team.subrun is not None
    for inner in team.subrun.handoffs:  # the team's result holds them as they were, named as in its sub-run
        was = before[f"h1/{inner.id}"]
        assert inner == was.model_copy(update={"id": inner.id, "target": inner.target}), (inner, was)
        assert inner.target == was.target.removeprefix("hive_team/")


async def test_a_teams_handoff_finished_before_a_restart_keeps_its_whole_record() -> None:
    stored = await _stored_when(lambda hs: _done(hs.get("h1")))
    assert stored.result is not None
    before = {h.id: h for h in stored.result.handoffs}
    views, final = await _resumed(stored)
    for view in views:
        assert view.result is not None
        assert {h.id: h for h in view.result.handoffs}["h1"] == before["h1"]
    assert final.result is not None
    assert final.result.handoffs == [before["h1"]]  # its sub-run too, times and all
