"""`mcp-team check` shows each role's model and endpoint and where each was set, through the command.

The user this is for: OPENAI_BASE_URL points at Ollama and no model is named, so the team would call
`gpt-4o-mini` there and learn at its first call (a 404) that the server has no such model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]

OLLAMA = "http://127.0.0.1:11434/v1"


def test_a_local_base_url_with_the_default_model_names_shows_both_and_warns(tmp_path: Path) -> None:
    check = cli_here("check", cwd=tmp_path, OPENAI_BASE_URL=OLLAMA)
    assert check.returncode == 0, check.stderr
    lines = check.stdout.splitlines()
    supervisor = lines.index(f"supervisor (and planner): openai:gpt-4o at {OLLAMA}")
    assert lines[supervisor + 1].strip() == (
        "model from openai's default model; openai chosen by OPENAI_BASE_URL; endpoint from OPENAI_BASE_URL"
    )
    assert f"specialists (unless their own): openai:gpt-4o-mini at {OLLAMA}" in lines
    assert f"the specialist's openai:gpt-4o-mini at {OLLAMA}: a default name of the provider's own API" in check.stderr
    assert "MCP_TEAM_SPECIALIST_MODEL=openai:NAME" in check.stderr and "Traceback" not in check.stderr


def test_each_role_says_whether_the_team_file_or_a_variable_set_its_model_and_endpoint(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        '[models]\nspecialist = "openai:qwen2.5:7b"\n\n'
        '[[specialists]]\nname = "writer"\ndescription = "Writes."\nprompt = "Write."\n'
    )
    check = cli_here(
        "check", "--team", str(team),
        OPENAI_API_KEY="sk-test", MCP_TEAM_SUPERVISOR_MODEL="openai:llama3.1", MCP_TEAM_SUPERVISOR_BASE_URL=OLLAMA,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    lines = [line.strip() for line in check.stdout.splitlines()]
    supervisor = lines.index(f"supervisor (and planner): openai:llama3.1 at {OLLAMA}")
    assert lines[supervisor + 1] == "model from MCP_TEAM_SUPERVISOR_MODEL; endpoint from MCP_TEAM_SUPERVISOR_BASE_URL"
    specialist = lines.index("specialists (unless their own): openai:qwen2.5:7b at the provider's API "
                             "(https://api.openai.com/v1)")  # fmt: skip
    assert lines[specialist + 1] == (
        f"model from [models] specialist in {team}; no base URL set (OPENAI_BASE_URL, MCP_TEAM_SPECIALIST_BASE_URL)"
    )
    assert "warning" not in check.stderr  # both models are named


def test_a_whole_team_offline_says_so_without_an_endpoint(tmp_path: Path) -> None:
    check = cli_here("check", cwd=tmp_path, MCP_TEAM_MODEL="offline")
    assert check.returncode == 0, check.stderr
    lines = [line.strip() for line in check.stdout.splitlines()]
    assert lines[lines.index("supervisor (and planner): offline") + 1] == "model from MCP_TEAM_MODEL (the whole team)"
