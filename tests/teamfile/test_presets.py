"""The shipped preset team files: each loads, builds its own team, and runs end to end offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_team.handoffs import Team
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.specialists.verdict import FORMAT_INSTRUCTIONS
from mcp_team.teamfile.loading import BUILTIN_TOOLS, TeamSpec, load_team_file
from mcp_team.teamfile.starter import PRESETS, preset_text

pytestmark = [pytest.mark.process]

REQUESTS = {
    "competitive-intelligence": (
        "Compare Acme, Globex and Initech's project-management tools with ours on features and pricing, "
        "and draft a one-page comparison report for the product team."
    ),
    "patient-case": (
        "Summarise the case in records/patient-0417 for tomorrow's ward round: recent admissions, the "
        "creatinine trend over the last 6 months (from 98 - 76 umol/L) and current medications."
    ),
    "portfolio": (
        "My holdings are in portfolio/holdings.csv and my target is 60/30/10 equities/bonds/cash. How far "
        "have I drifted, and what trades would bring me back within 5%? Total value is 12000 + 8000 + 5000."
    ),
    "curriculum": (
        "Design a 6-week introductory course on data visualisation for second-year biology students, "
        "2 hours a week: learning objectives, lesson plans, exercises and a final project."
    ),
    "product-launch": (
        "We launch a smart water bottle for cyclists next month. Research the market, propose a price with a "
        "margin over our $18 unit cost (39 - 18), and write the launch email and three social posts."
    ),
    "contract-review": (
        "Review contracts/acme-msa.txt against our playbook in policies/: liability, indemnities, data "
        "protection, termination and auto-renewal. Give me a risk report citing clause numbers."
    ),
    "research-desk": (
        "Brief me on solid-state batteries for electric cars: who is closest to production, the energy "
        "densities, and what could still go wrong."
    ),
}


def _load(name: str, tmp_path: Path) -> TeamSpec:
    path = tmp_path / "team.toml"
    path.write_text(preset_text(name), encoding="utf-8")
    return load_team_file(path)


def test_every_preset_has_a_request() -> None:
    assert set(REQUESTS) == set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_and_builds_its_own_team(name: str, tmp_path: Path) -> None:
    spec = _load(name, tmp_path)
    team = spec.build(None, lenient=True)
    names = [s.name for s in team]

    assert len(team) >= 3
    assert not set(names) & {s.name for s in DEFAULT_TEAM}, "a preset has its own specialists"
    assert all(s.system_prompt.strip() for s in team)
    assert all(s.description.strip() and "\n" not in s.description for s in team)
    reviewers = [s for s in team if s.returns_verdict]
    assert reviewers, "a preset needs a reviewer that returns a verdict"
    for reviewer in reviewers:
        assert FORMAT_INSTRUCTIONS in reviewer.system_prompt
    # Only built-in tools: the preset works without any external MCP server.
    assert spec.mcp_servers == []
    assert {t.name for s in team for t in s.tools} <= set(BUILTIN_TOOLS)
    assert [s.name for s in spec.build(None)] == names  # no MCP pool needed, even when strict


@pytest.mark.parametrize("name", PRESETS)
def test_preset_text_says_what_it_is_and_how_to_use_it(name: str) -> None:
    text = preset_text(name)
    assert text.startswith(f"# mcp-team preset: {name}\n")
    for command in (f"mcp-team init --preset {name}", "mcp-team check", "mcp-team serve --team team.toml"):
        assert command in text


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("patient-case", "supports, and does not replace, clinical judgement"),
        ("portfolio", "not financial advice"),
        ("contract-review", "not legal advice"),
    ],
)
def test_sensitive_presets_carry_their_safety_language(name: str, phrase: str, tmp_path: Path) -> None:
    team = _load(name, tmp_path).build(None, lenient=True)
    assert any(phrase in s.system_prompt for s in team)


def test_presets_do_not_share_specialists(tmp_path: Path) -> None:
    teams: dict[str, frozenset[str]] = {}
    for name in PRESETS:
        folder = tmp_path / name
        folder.mkdir()
        teams[name] = frozenset(s.name for s in _load(name, folder).build(None, lenient=True))
    assert len(set(teams.values())) == len(PRESETS)
    for a in PRESETS:
        for b in PRESETS:
            if a < b:
                assert not teams[a] & teams[b], f"{a} and {b} share specialists {sorted(teams[a] & teams[b])}"


@pytest.mark.anyio
@pytest.mark.parametrize("name", PRESETS)
async def test_preset_runs_end_to_end_offline(name: str, tmp_path: Path) -> None:
    spec = _load(name, tmp_path)
    team = Team(ModelSet.single(OfflineModel()), spec.build(None, lenient=True), spec.run_settings)

    result = await team.run(REQUESTS[name])

    assert result.status in ("complete", "partial"), (result.status, result.stopped_by, result.failures)
    if result.status == "partial":  # offline, only gates judging the stand-in text may fail: and the run says so
        assert any("quality gates judge a model's real text" in n for n in result.notes), result.failures
    assert result.mode == spec.run_settings.mode
    completed = [h for h in result.handoffs if h.status == "completed"]
    assert completed
    assert {h.target for h in completed} <= {s.name for s in team.specialists}
    assert result.answer
