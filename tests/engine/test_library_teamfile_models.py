"""Models in the team file, as `check` and `run` read them: a base URL without its scheme (`localhost:8080`), in
the team file or the environment, is refused when read, saying how to write it (before, every call to it failed
as a connection error, retried, in every handoff); a member's or a fallback's model without a key names whose it
is and where its key can go."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]

MEMBER = """
[[specialists]]
name = "scout"
description = "Finds facts."
prompt = "List facts only."
model = "openai:qwen2.5:7b"
base_url = "{url}"
"""


def test_a_team_file_base_url_without_a_scheme_is_named_with_how_to_write_it(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text(MEMBER.format(url="localhost:8080"))
    check = cli_here("check", cwd=tmp_path)
    assert check.returncode == 2, check.stderr
    assert (
        "specialists[0].base_url: 'localhost:8080' is not a base URL; write it with http:// or https://, "
        "e.g. http://localhost:8080" in check.stderr
    )
    assert "Traceback" not in check.stderr


def test_a_team_file_base_url_with_its_scheme_is_taken(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text(MEMBER.format(url="http://localhost:8080/v1"))
    check = cli_here("check", cwd=tmp_path, OPENAI_API_KEY="sk-test")
    assert check.returncode == 0, check.stderr
    assert "openai:qwen2.5:7b at http://localhost:8080/v1" in check.stdout


def test_an_environment_base_url_without_a_scheme_is_refused_before_the_run(tmp_path: Path) -> None:
    run = cli_here("run", "--ephemeral", "Research bees", cwd=tmp_path, OPENAI_BASE_URL="localhost:11434/v1")
    assert run.returncode == 2, run.stderr
    assert "'localhost:11434/v1' is not a base URL; write it with http:// or https://" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_members_model_without_a_key_names_the_member_and_its_api_key_env(tmp_path: Path) -> None:
    team = '[models]\nsupervisor = "offline"\nspecialist = "offline"\n' + MEMBER.replace('base_url = "{url}"\n', "")
    (tmp_path / "team.toml").write_text(team)
    run = cli_here("run", "--ephemeral", "Research bees", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert (
        "specialist 'scout': the openai backend needs an API key: set OPENAI_API_KEY (or "
        "api_key_env = \"VARIABLE\" in specialist 'scout''s entry)" in run.stderr
    )
    assert "MCP_TEAM_SPECIALIST_API_KEY" not in run.stderr  # not read for a member's own model


def test_a_fallback_model_without_a_key_is_named_as_the_fallback(tmp_path: Path) -> None:
    team = '[models]\nsupervisor = "offline"\nspecialist = "offline"\nsupervisor_fallback = "anthropic:claude-x"\n'
    (tmp_path / "team.toml").write_text(team + MEMBER.replace('model = "openai:qwen2.5:7b"\nbase_url = "{url}"\n', ""))
    run = cli_here("run", "--ephemeral", "Research bees", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert (
        "the supervisor's fallback model: the anthropic backend needs an API key: set ANTHROPIC_API_KEY\n" in run.stderr
    )
