"""Teams inside teams (issue 13): a two-level run offline through `run_team`, and nesting refused at load."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_team.handoffs import Budgets, RunResult, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team_file
from mcp_team.teamfile.schema import TeamFileError
from mcp_team.telemetry import attributes as A
from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

MEMBER = """
[[specialists]]
name = "{name}"
description = "{description}"
prompt = "Do the {name}'s part of the task."
"""

RESEARCH = (
    '[supervisor]\nmode = "planned"\n'
    + MEMBER.format(name="web_researcher", description="Finds facts on the web.")
    + MEMBER.format(name="fact_checker", description="Checks the facts found.")
)

MAIN = """
[supervisor]
mode = "planned"

[[specialists]]
name = "research_team"
description = "A research team that finds and checks facts."
team = "research.toml"
""" + MEMBER.format(name="writer", description="Writes the answer from the findings.")


def files(tmp_path: Path, main: str = MAIN, research: str = RESEARCH) -> Path:
    (tmp_path / "research.toml").write_text(research)
    (tmp_path / "team.toml").write_text(main)
    return tmp_path / "team.toml"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_two_level_run_nests_its_record_spans_budget_and_progress(mode: str, tmp_path: Path, spans) -> None:
    spec = load_team_file(files(tmp_path))
    progress: list[str] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with Client(build_server(ModelSettings(model="offline"), spec), mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        result = await client.call_tool(
            "run_team",
            {"request": "Ask the research team about bees and write a report"},
            progress_callback=on_progress,
        )
        alone = await client.call_tool("research_team", {"task": "Find facts about bees"})

    assert {"research_team", "writer"} <= tools and "research_team" in prompts  # a member like any other
    assert not alone.is_error and alone.structured_content["status"] == "completed"
    run = RunResult.model_validate(result.structured_content)
    assert run.status == "complete", run.answer
    team_handoff, writer = run.handoffs
    assert (team_handoff.target, writer.target) == ("research_team", "writer")
    sub = team_handoff.subrun
    assert sub is not None and [h.target for h in sub.handoffs] == ["web_researcher", "fact_checker"]
    assert team_handoff.output == sub.answer and team_handoff.usage == sub.usage.total
    # The parent's budget counted the whole tree: its calls, and the sub-run's.
    assert run.usage.model_calls == sub.usage.model_calls + 3  # plan, writer, synthesis
    assert any(m.startswith("research_team/web_researcher") for m in progress), progress

    in_run = [s for s in spans.all if spans.attr(s, A.CONVERSATION_ID) == run.run_id]
    # the research_team tool call is a run of its own, with its own transfer span: take the run_team one
    (transfer,) = [s for s in in_run if s.name == "execute_tool transfer_to_research_team"]
    (inner,) = spans.children(transfer)
    assert inner.name == "invoke_agent research_team"
    assert {"invoke_agent web_researcher", "invoke_agent fact_checker"} <= {s.name for s in in_run}
    assert {s.context.trace_id for s in in_run} == {transfer.context.trace_id}
    assert sub.trace_id == run.trace_id == format(transfer.context.trace_id, "032x")  # its record names the one trace
    (researcher,) = [s for s in in_run if s.name == "invoke_agent web_researcher"]
    assert spans.parent(researcher).name == "execute_tool transfer_to_web_researcher"
    assert spans.parent(spans.parent(researcher)) == inner  # the sub-team's spans sit under the parent's handoff


@pytest.mark.anyio
async def test_the_parents_budget_holds_over_the_tree(tmp_path: Path) -> None:
    spec = load_team_file(files(tmp_path))
    team = Team(ModelSet.single(OfflineModel()), spec.build(), spec.run_settings)
    run = await team.run("Ask the research team about bees and write a report", budgets=Budgets(max_model_calls=4))
    assert run.usage.model_calls <= 4
    team_handoff = run.handoffs[0]
    assert team_handoff.target == "research_team" and team_handoff.subrun is not None
    assert team_handoff.subrun.usage.model_calls < 4  # carved out of what the parent had left
    assert team_handoff.error_type == "budget_exhausted"  # not retried: the tree's budget is spent
    assert [h.target for h in run.handoffs].count("research_team") == 1


def test_an_inline_team_loads_like_a_file(tmp_path: Path) -> None:
    inline = MAIN.replace('team = "research.toml"', "") + "\n"
    inline = inline.replace(
        '[[specialists]]\nname = "writer"',
        "[specialists.team]\n" + '[[specialists.team.specialists]]\nname = "web_researcher"\ndescription = "Finds."\n'
        'prompt = "Find."\n\n[[specialists]]\nname = "writer"',
    )
    (tmp_path / "team.toml").write_text(inline)
    members = {s.name: s for s in load_team_file(tmp_path / "team.toml").build()}
    assert [m.name for m in members["research_team"].members] == ["web_researcher"]  # type: ignore[attr-defined]


def test_a_cycle_between_team_files_is_refused_at_load(tmp_path: Path) -> None:
    research = RESEARCH + '\n[[specialists]]\nname = "back"\ndescription = "The main team again."\nteam = "team.toml"\n'
    with pytest.raises(TeamFileError) as caught:
        load_team_file(files(tmp_path, research=research))
    assert "a cycle between team files: team.toml -> research.toml -> team.toml" in str(caught.value)
    proc = subprocess.run(
        [MCP_TEAM, "check", "--team", str(tmp_path / "team.toml")], capture_output=True, text=True,
        timeout=HANG_GUARD, env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 2 and "a cycle between team files" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_team_deeper_than_the_limit_is_refused_at_load(tmp_path: Path) -> None:
    def nesting(name: str, inner: str) -> str:
        return f'[[specialists]]\nname = "{name}"\ndescription = "Nested."\nteam = "{inner}"\n'

    (tmp_path / "d.toml").write_text(RESEARCH)
    (tmp_path / "c.toml").write_text(nesting("level_d", "d.toml"))
    (tmp_path / "b.toml").write_text(nesting("level_c", "c.toml"))
    (tmp_path / "a.toml").write_text(nesting("level_b", "b.toml"))
    with pytest.raises(TeamFileError) as caught:
        load_team_file(tmp_path / "a.toml")
    assert "teams nest deeper than max_team_depth (3): a.toml -> b.toml -> c.toml -> level_d" in str(caught.value)
    load_team_file(tmp_path / "b.toml")  # three levels are fine
    deeper: dict[str, Any] = {}
    (tmp_path / "a.toml").write_text("[supervisor]\nmax_team_depth = 4\n" + nesting("level_b", "b.toml"))
    assert load_team_file(tmp_path / "a.toml").subteams != deeper


def test_check_shows_a_member_that_is_a_team(tmp_path: Path) -> None:
    proc = subprocess.run(
        [MCP_TEAM, "check", "--team", str(files(tmp_path))], capture_output=True, text=True, timeout=HANG_GUARD,
        env=clean_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "team: web_researcher," in proc.stdout and "fact_checker" in proc.stdout  # the cell may wrap
