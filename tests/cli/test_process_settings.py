"""One settings object per command (cli/settings.py): the team file, the call timeout, the trace directory, the
stdio message limit and content capture are read once, a flag over its variable, and a bad value is named by
the flag and the variable that set it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mcp_team.cli.settings import ProcessSettings, process_settings
from mcp_team.errors import ConfigError
from mcp_team.teamfile.starter import render_team_file
from mcp_team.telemetry.content import CAPTURE_ENV
from support import cli_here, run_cli


def test_the_team_file_is_the_flags_else_the_variables(tmp_path: Path) -> None:
    named, flagged = tmp_path / "named.toml", tmp_path / "flagged.toml"
    for path in (named, flagged):
        path.write_text(render_team_file(), encoding="utf-8")
    by_variable = cli_here("check", MCP_TEAM_FILE=str(named))
    assert by_variable.returncode == 0 and by_variable.stdout.startswith(f"{named}: "), by_variable.stderr
    by_flag = cli_here("check", "--team", str(flagged), MCP_TEAM_FILE=str(named))
    assert by_flag.returncode == 0 and by_flag.stdout.startswith(f"{flagged}: "), by_flag.stderr
    missing = cli_here("check", MCP_TEAM_FILE=str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and f"{tmp_path / 'nope.toml'}: invalid team file" in missing.stderr


def test_a_bad_value_is_named_by_its_flag_and_variable_and_a_flag_wins() -> None:
    small = cli_here("serve", "--model", "offline", MCP_TEAM_MAX_MESSAGE_BYTES="12")  # before stdin is read
    assert small.returncode == 2, small.stderr
    assert "invalid settings: MCP_TEAM_MAX_MESSAGE_BYTES: Input should be greater than or equal to 1024" in small.stderr
    long = cli_here("run", "--model", "offline", "x", MCP_TEAM_CALL_TIMEOUT="1e9")
    assert long.returncode == 2 and "--call-timeout / MCP_TEAM_CALL_TIMEOUT: must be a positive number of seconds, " \
        "at most 86400 (a day), got 1e+09" in long.stderr, long.stderr  # fmt: skip
    # the flag's value is the one used: the variable's is never read, so it cannot be wrong
    flag = cli_here("run", "--model", "offline", "--ephemeral", "--quiet", "--call-timeout", "30", "Research bees",
                    MCP_TEAM_CALL_TIMEOUT="abc")  # fmt: skip
    assert flag.returncode == 0, flag.stderr
    assert all("Traceback" not in p.stderr for p in (small, long, flag))


def test_settings_are_read_once_per_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_TRACE_DIR", "/tmp/by-variable")
    monkeypatch.setenv("MCP_TEAM_CALL_TIMEOUT", "12")
    args = argparse.Namespace(team="flag.toml", trace_dir=None)
    settings = process_settings(args)
    assert (settings.team_file, settings.trace_dir, settings.call_timeout) == ("flag.toml", "/tmp/by-variable", 12.0)
    monkeypatch.setenv("MCP_TEAM_CALL_TIMEOUT", "abc")  # read already: a later change is not seen halfway
    assert process_settings(args) is settings
    with pytest.raises(ConfigError, match="MCP_TEAM_CALL_TIMEOUT: Input should be a valid number"):
        process_settings(argparse.Namespace())
    monkeypatch.delenv("MCP_TEAM_CALL_TIMEOUT")
    assert ProcessSettings(team_file="a.toml").team_file == "a.toml"  # as a library caller builds it


@pytest.mark.process  # capture is the process's, as is its tracer
@pytest.mark.parametrize("capture", ["true", ""])
def test_content_on_spans_is_as_the_variable_says(tmp_path: Path, capture: str) -> None:
    request = "Research the history of beekeeping"
    proc = run_cli("run", "--model", "offline", "--ephemeral", "--quiet", "--trace-dir", str(tmp_path), request,
                   env={CAPTURE_ENV: capture})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (trace,) = tmp_path.glob("*.json")
    spans = json.loads(trace.read_text(encoding="utf-8"))["resourceSpans"]
    assert spans
    assert (request in trace.read_text(encoding="utf-8")) is (capture == "true")
