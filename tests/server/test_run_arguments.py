"""The run arguments have one definition (`server/surface/run_arguments.py`): `run_team` and `start_run` list
the same input schema, and it is the schema they listed before that definition was shared (the fixture was
captured from `tools/list` then), property order included, on both protocol revisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
LISTED = Path(__file__).parents[1] / "fixtures" / "run_arguments.schema.json"


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_run_team_and_start_run_list_the_schema_they_listed(mode: str) -> None:
    async with Client(build_server(ModelSettings(model="offline")), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}

    listed = json.loads(LISTED.read_text())
    for name in ("run_team", "start_run"):
        schema = tools[name].input_schema  # a change meant to be made is made in the fixture too
        assert schema == listed[name], name
        assert list(schema["properties"]) == list(listed[name]["properties"]), name  # the order a client's model reads
    assert {**tools["start_run"].input_schema, "title": ""} == {**tools["run_team"].input_schema, "title": ""}
