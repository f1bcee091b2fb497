"""Replicas count an endpoint's requests per minute together (`Durability` shares the rate with the server's
models once its run store opens). A team file edit of the models (`serve --watch`) or a configuration that can
build them only later makes a new model set: it must count with the replicas too, not on its own."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcp_team.llm import ModelSet
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.state import ServerState
from mcp_team.teamfile.loading import load_team_file

pytestmark = pytest.mark.anyio

POET = """
[[specialists]]
name = "poet"
description = "Writes short poems."
prompt = "Write a short poem."
"""


class CountedRate:
    """A rate shared with other replicas (the `SharedRate` protocol): here it only counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def acquire(self, key: str, per_minute: float) -> None:
        self.asked.append(key)


async def _calls_counted(models: ModelSet, rate: CountedRate) -> int:
    before = len(rate.asked)
    model = models.for_role("specialist")
    async with models.limiter_for(model).slot(10):
        pass
    return len(rate.asked) - before


async def test_models_built_after_a_team_edit_count_with_the_replicas(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(POET)
    # An OpenAI-compatible endpoint (nothing is called: a slot is only taken); offline models have no rates.
    settings = ModelSettings(openai_base_url="http://127.0.0.1:9/v1", requests_per_minute=600)
    state = ServerState(settings, load_team_file(path))
    state.base_settings = settings
    rate = CountedRate()
    async with anyio.create_task_group() as tg:
        await state.load(state.team, tg)
        first = state.own_models()
        assert first is not None
        state.share_rate(rate)
        assert await _calls_counted(first, rate) == 1

        path.write_text(POET + '\n[models]\nspecialist = "openai:gpt-4o"\n')
        await state.load(load_team_file(path), tg)
        second = state.own_models()
        assert second is not None and second is not first  # the edit made a new model set
        assert await _calls_counted(second, rate) == 1, "the rebuilt models counted their requests on their own"
        state.close_pool()
