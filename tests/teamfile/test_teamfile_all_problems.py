"""A team file with schema errors (a wrong type, an unknown key) and problems only the later checks see (an
unknown tool, a duplicate name, an unknown member): one run of `mcp-team check` or `run` says them all. It said
the schema's errors only; fixed, the file failed again with the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import run_cli

pytestmark = [pytest.mark.process]

BOTH_KINDS = """
[supervisor]
max_retry = 3                      # unknown key

[models]
supervisor = "nope:model"          # no such provider

[[specialists]]
name = "poet"
description = "Writes poems."
prompt = "Write a poem."
max_turns = "lots"                 # a wrong type
tools = ["telepathy"]              # no such tool

[[specialists]]
name = "poet"                      # a duplicate
description = "Writes more poems."
prompt = "Write a poem."
fallback = "nobody"                # no such member
"""

EXPECTED = [
    "supervisor.max_retry: unknown key",
    "specialists[0].max_turns: Input should be a valid integer",
    "models.supervisor: unknown provider 'nope'",
    "specialists[0].tools[0]: unknown tool 'telepathy'",
    "specialists[1].name: 'poet' is used by another specialist",
    "specialists[1].fallback: 'nobody' must be another specialist",
]


@pytest.mark.parametrize(
    "command", [["check", "--team", "team.toml"], ["run", "--model", "offline", "--team", "team.toml", "hi"]]
)
def test_one_run_says_the_schema_errors_and_the_others(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "team.toml").write_text(BOTH_KINDS)
    proc = run_cli(*command, cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "team.toml: invalid team file:" in proc.stderr  # the file, then each problem by its key path
    listed = [line.removeprefix("  - ") for line in proc.stderr.splitlines() if line.startswith("  - ")]
    for expected in EXPECTED:
        assert any(line.startswith(expected) for line in listed), (expected, proc.stderr)
    assert len(listed) == len(EXPECTED), proc.stderr


def test_what_a_schema_error_left_out_is_not_called_missing(tmp_path: Path) -> None:
    """An entry with a schema error is left out of the later checks, but named as the file numbers it, and
    what refers to it (a fallback, a grant of its server's tools, a tool's directories) is not called unknown."""
    (tmp_path / "team.toml").write_text("""
[tools]
read_dirs = "docs"                 # a wrong type: the directories are there, misspelt

[[mcp_servers]]
name = "search"
command = "uvx"
url = "http://127.0.0.1:9/mcp"     # both transports

[[specialists]]
name = "helper"                    # no description
prompt = "Help."

[[specialists]]
name = "poet"
description = "Writes poems."
prompt = "Write a poem."
tools = ["search/web", "read_file", "telepathy"]
fallback = "helper"

[[specialists]]
name = "sub"
description = "A team of its own."
team = { specialists = [{ name = "inner", description = "d", prompt = "p", colour = "red", tools = ["nope"] }] }
""")
    proc = run_cli("check", "team.toml", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    listed = [line.removeprefix("  - ") for line in proc.stderr.splitlines() if line.startswith("  - ")]
    expected = [
        "tools.read_dirs: Input should be a valid list",
        "mcp_servers[0]: MCP server 'search': give either `command`",
        "specialists[0].description: is required",
        "specialists[1].tools[2]: unknown tool 'telepathy'",  # [1]: the file's index, with [0] left out
        "specialists[2].team.specialists[0].colour: unknown key",  # an inline team: both kinds too
        "specialists[2].team.specialists[0].tools[0]: unknown tool 'nope'",
    ]
    for problem in expected:
        assert any(line.startswith(problem) for line in listed), (problem, proc.stderr)
    assert len(listed) == len(expected), proc.stderr
