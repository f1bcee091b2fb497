"""What `mcp-team eval` says and writes, as a user meets it: case text with brackets shown as it is, the --json
target checked before any run, and the call timeout set as for `run` (flag or MCP_TEAM_CALL_TIMEOUT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]

BRACKETS = """\
name = "suite [nightly]"

[[cases]]
name = "bees"
request = "Research bees and write a haiku"
expect.contains = ["[offline researcher]", "[/red] never there"]
"""

CASE = """\
[[cases]]
name = "bees"
request = "Research bees and write a haiku"
expect.called = ["researcher", "writer"]
"""


def test_a_failing_case_whose_text_has_brackets_is_reported_as_written(tmp_path: Path) -> None:
    """It crashed after every run with "unexpected MarkupError", and the --json report was lost."""
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(BRACKETS)

    proc = cli_here("eval", str(suite), "--model", "offline", "--report", str(report))

    assert proc.returncode == 1, proc.stderr  # the case fails: it is said, not a crash
    assert "MarkupError" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    assert "✗ bees: contains: the answer lacks '[/red] never there'" in proc.stdout, proc.stdout
    assert "suite [nightly]: 0/1 cases pass" in proc.stdout, proc.stdout  # the title, `[nightly]` kept
    assert json.loads(report.read_text())["cases"][0]["passed"] is False


@pytest.mark.parametrize("target", ["a directory", "under a file"])
def test_a_json_target_that_cannot_be_written_is_refused_before_any_run(tmp_path: Path, target: str) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE)
    path = tmp_path if target == "a directory" else suite / "report.json"

    proc = cli_here("eval", str(suite), "--model", "offline", "--report", str(path))

    assert proc.returncode == 2, proc.stderr  # a usage error, not 1 ("cases failed")
    assert proc.stdout == "" and "✓" not in proc.stderr and "case(s) from" not in proc.stderr  # nothing ran
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mcp-team: error: --report {path}: "), proc.stderr
    assert ("is a directory; give a file name" if target == "a directory" else "is a file, not a directory") in lines[0]


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_the_call_timeout_cuts_a_call_that_never_answers(tmp_path: Path, how: str) -> None:
    """A `timeout` fault hung each call for the default 180 s: eval had no --call-timeout and ignored the variable.
    (Without it this test is stopped by support's hang guard.)"""
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(CASE)
    flag = ["--call-timeout", "0.5"] if how == "flag" else []
    env = {"MCP_TEAM_CALL_TIMEOUT": "0.5"} if how == "variable" else {}

    args = ["eval", str(suite), "--model", "offline", "--fault", "timeout:researcher:1", "--report", str(report)]
    proc = cli_here(*args, *flag, "--quiet", **env)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(report.read_text())["cases"][0]["runs"][0]
    assert run["passed"] and run["handoffs"] == 3, run  # the researcher's cut call retried, once


def test_a_call_timeout_that_is_not_a_number_is_one_line(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE)

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet", MCP_TEAM_CALL_TIMEOUT="soon")

    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (  # as run and serve say it (cli/settings.py)
        "mcp-team: error: invalid settings: --call-timeout / MCP_TEAM_CALL_TIMEOUT: Input should be a valid number, "
        "unable to parse string as a number"
    )


def test_the_deadline_flag_replaces_the_team_files_for_every_run(tmp_path: Path) -> None:
    """A slow local model's runs (the 1.5B re-recording) need more than the default ten minutes; a tiny deadline
    shows the flag reaches each run: it winds down with the deadline named."""
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(CASE)

    proc = cli_here("eval", str(suite), "--model", "offline", "--deadline", "0.001", "--report", str(report),
                    MCP_TEAM_OFFLINE_LATENCY_MS="50")  # fmt: skip

    assert proc.returncode == 1, proc.stderr  # the case fails: its run stopped at the deadline
    (case,) = json.loads(report.read_text())["cases"]
    assert case["passed"] is False
    assert "deadline (0.001 s) passed" in json.dumps(case), case

    for wrong in ("0", "-5", "nan", "1e12"):
        refused = cli_here("eval", str(suite), "--model", "offline", "--deadline", wrong)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip() == (
            f"mcp-team: error: --deadline must be a positive number of seconds, at most a year; got {float(wrong):g}"
        )
