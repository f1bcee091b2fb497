"""A base URL without its scheme (`localhost:8080`), in the team file or the environment, is refused when it is
read, saying how to write it. Before, every call to it failed as a connection error, retried, in every handoff."""

from __future__ import annotations

from pathlib import Path

from support import cli_here

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
    assert check.returncode == 1, check.stderr
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
