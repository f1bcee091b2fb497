"""A whole table or list of a team file that fails its schema (`[supervisor]` a string, `[specialists.NAME]`
instead of `[[specialists]]`, an entry that is not a table, every specialist broken): one `mcp-team check`
still says the file's other problems, and calls nothing unknown that was only left out with its table. It said
the schema's errors only (no specialist left), or called a member or MCP server of a left-out table unknown.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.process]

BAD_MODEL = '[models]\nsupervisor = "nope:model"          # no such provider\n'
POET = """
[[specialists]]
name = "poet"
description = "Writes poems."
prompt = "Write a poem."
"""

CASES = {
    "tables that are strings": (
        'supervisor = "fast"\nmodels = "gpt"\ntools = ["read_file"]\n'
        + POET
        + 'tools = ["read_file", "telepathy"]\nfallback = "nobody"\n',
        [
            "supervisor: Input should be a valid dictionary",
            "models: Input should be a valid dictionary",
            "tools: Input should be a valid dictionary",
            "specialists[0].fallback: 'nobody' must be another specialist",
            "specialists[0].tools[1]: unknown tool 'telepathy'",
        ],
    ),
    "specialists as [specialists.NAME]": (
        BAD_MODEL
        + """
[supervisor]
judge = "critic"                   # the member is there, in the table left out
checkpoints = ["before:critic", "later"]

[[mcp_servers]]
name = "search"
command = "uvx"

[[mcp_servers]]
name = "search"
command = "uvx"

[specialists.critic]
description = "Judges."
prompt = "Judge."
""",
        [
            "specialists: Input should be a valid list",
            "models.supervisor: unknown provider 'nope'",
            'supervisor.checkpoints: checkpoint \'later\': use "plan" or "before:<member>"',
            "mcp_servers[0].name: 'search' is declared more than once",
            "mcp_servers[1].name: 'search' is declared more than once",
        ],
    ),
    "every specialist broken": (
        BAD_MODEL
        + """
[supervisor]
judge = "poet"

[[specialists]]
name = "poet"                      # no description
prompt = "Write a poem."

[[specialists]]
name = "critic"
description = ""                   # too short
prompt = "Judge."
""",
        [
            "specialists[0].description: is required",
            "specialists[1].description: String should have at least 1 character",
            "models.supervisor: unknown provider 'nope'",
        ],
    ),
    "a specialist that is not a table": (
        'specialists = ["critic", { name = "poet", description = "d", prompt = "p", fallback = "critic", '
        'tools = ["telepathy"] }]\n[supervisor]\njudge = "critic"\ncheckpoints = ["before:critic"]\n',
        [
            "specialists[0]: Input should be a valid dictionary",
            "specialists[1].tools[0]: unknown tool 'telepathy'",
        ],
    ),
    "MCP servers that are not tables": (
        'mcp_servers = "search"\n' + BAD_MODEL + POET + 'tools = ["search/web", "telepathy"]\n',
        [
            "mcp_servers: Input should be a valid list",
            "models.supervisor: unknown provider 'nope'",
            "specialists[0].tools[1]: unknown tool 'telepathy'",
        ],
    ),
    "an MCP server that is not a table": (
        'mcp_servers = ["search"]\n' + POET + 'tools = ["search/web", "telepathy"]\n',
        [
            "mcp_servers[0]: Input should be a valid dictionary",
            "specialists[0].tools[1]: unknown tool 'telepathy'",
        ],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_whole_table_left_out_leaves_the_rest_checked(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    (tmp_path / "team.toml").write_text(text)
    proc = subprocess.run([MCP_TEAM, "check", "team.toml"], capture_output=True, text=True, timeout=HANG_GUARD,
                          cwd=tmp_path, env=clean_env())  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    listed = [line.removeprefix("  - ") for line in proc.stderr.splitlines() if line.startswith("  - ")]
    for problem in expected:
        assert any(line.startswith(problem) for line in listed), (problem, proc.stderr)
    assert len(listed) == len(expected), proc.stderr  # nothing left out is called unknown


def test_specialists_written_as_tables_says_how_to_write_them(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text('[specialists.poet]\ndescription = "d"\nprompt = "p"\n')
    proc = subprocess.run([MCP_TEAM, "check", "team.toml"], capture_output=True, text=True, timeout=HANG_GUARD,
                          cwd=tmp_path, env=clean_env())  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "[[specialists]]" in proc.stderr, proc.stderr
