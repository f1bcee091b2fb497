"""A run's record while it runs: every progress event can build the record as it stands (`snapshot`)."""

from __future__ import annotations

import pytest

from mcp_team.handoffs import RunEvent, RunResult, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel

pytestmark = pytest.mark.anyio


async def test_every_event_can_snapshot_the_run_so_far() -> None:
    team = Team(ModelSet.single(FaultyModel(OfflineModel(), parse_faults("rate_limit:researcher:1"))))
    seen: list[tuple[str, RunResult]] = []

    async def on_event(event: RunEvent) -> None:
        assert event.snapshot is not None
        seen.append((event.kind, event.snapshot()))

    final = await team.run("Research bees and calculate 2+2", on_event=on_event)

    kind, first = seen[0]
    assert kind == "run_started"
    assert first.status == "running" and first.handoffs == [] and first.run_id == final.run_id
    assert first.started_at == final.started_at and first.ended_at is None
    for kind, snap in seen:
        assert snap.status == "running" and snap.run_id == final.run_id
        if kind == "handoff_started":
            assert snap.handoffs[-1].status == "running"
    # the researcher's first attempt failed and was retried: the live record shows the failure before the end
    failed = next(snap for kind, snap in seen if kind == "handoff_finished" and snap.failures)
    assert failed.failures[0].kind == "rate_limited" and failed.failures[0].specialist == "researcher"
    # (the final record lists handoffs in handoff order; live ones come in the order they started)
    assert sorted(h.id for h in seen[-1][1].handoffs) == sorted(h.id for h in final.handoffs)
    assert final.status == "complete"
