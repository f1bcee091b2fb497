"""What every `mcp-team` command has in common, through the CLI: help text for every option, `--version`, `--json`
meaning one thing, a bad team file as exit 2, output that is not a terminal never wrapped, and a local model
server that is not running said at once, by its URL."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from mcp_team import __version__
from mcp_team.cli.main import build_parser
from support import cli_here

pytestmark = [pytest.mark.process]

BAD_TEAM = '[[specialists]]\nname = "poet"\ndescription = "Writes poems."\nprompt = "Write."\ntools = ["telepathy"]\n'
CASE = """
[[cases]]
name = "bees"
request = "Research bees and write a short report"
expect.called = ["researcher", "writer"]
"""


def parsers(parser: argparse.ArgumentParser, path: str = "mcp-team") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, subcommands too (`runs show`), with the words that reach it."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += parsers(sub, f"{path} {name}")
    return found


def test_every_option_of_every_command_says_what_it_does() -> None:
    missing = [
        f"{path} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not (action.help or "").strip()
    ]
    assert missing == []


def test_run_help_explains_the_budget_flags() -> None:
    shown = cli_here("run", "--help", COLUMNS="200")
    assert shown.returncode == 0
    options = " ".join(shown.stdout.split("options:", 1)[1].split())  # past the usage line
    explained = {"--max-handoffs N": "stop after N handoffs", "--max-model-calls N": "after N model calls",
                 "--max-tokens N": "after N tokens", "--deadline SECONDS": "after SECONDS of wall-clock"}  # fmt: skip
    for flag, words in explained.items():
        assert words in options.split(flag, 1)[1][:120], flag


def test_version() -> None:
    shown = cli_here("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"mcp-team {__version__}"


def test_the_fault_help_names_each_target_once() -> None:
    shown = " ".join(cli_here("run", "--help").stdout.split("options:", 1)[1].split())
    fault = shown.split("--fault KIND[:AGENT[:TIMES]]", 1)[1].split("--team", 1)[0]
    agent = fault.split("AGENT:", 1)[1].split(";", 1)[0]  # it said "a specialist, supervisor, planner or specialist"
    for target in ("member's name", "supervisor", "planner"):
        assert agent.count(target) == 1, agent
    assert "specialist" not in agent, agent


def test_check_takes_a_model_and_exits_2_on_a_bad_team_file_as_run_does(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(BAD_TEAM)
    checked = cli_here("check", "--team", "bad.toml", "--model", "offline", cwd=tmp_path)
    ran = cli_here("run", "--ephemeral", "--team", "bad.toml", "--model", "offline", "hello", cwd=tmp_path)
    assert checked.returncode == ran.returncode == 2
    assert "unknown tool 'telepathy'" in checked.stderr and "unknown tool 'telepathy'" in ran.stderr

    settings = cli_here("check", "--http", "--port", "99999")  # as `serve --http --port 99999` exits
    assert settings.returncode == 2 and "--port / MCP_TEAM_PORT" in settings.stderr, settings.stderr

    good = cli_here("check", "--model", "offline", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "offline" in good.stdout


def test_json_prints_the_result_on_stdout_for_every_command_that_takes_it(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE)
    run = cli_here("run", "--ephemeral", "--model", "offline", "--quiet", "--json", "Research bees")
    evaluated = cli_here("eval", str(suite), "--model", "offline", "--quiet", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["status"] == "complete"
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)  # the report alone: no table around it
    assert [c["name"] for c in report["cases"]] == ["bees"], report


def test_eval_writes_its_report_with_report_and_says_so_when_json_is_given_a_file(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE)
    written = cli_here("eval", str(suite), "--model", "offline", "--quiet", "--report", str(tmp_path / "r.json"))
    assert written.returncode == 0 and "1/1 cases pass" in written.stdout
    assert json.loads((tmp_path / "r.json").read_text())["cases"][0]["name"] == "bees"

    old = cli_here("eval", str(suite), "--model", "offline", "--json", str(tmp_path / "r.json"))
    assert old.returncode == 2 and "--report FILE" in old.stderr and not old.stdout


def test_piped_output_is_never_wrapped(tmp_path: Path) -> None:
    folder = tmp_path / ("a-folder-with-a-long-name-" * 6)  # as pytest-xdist's temporary paths are
    folder.mkdir()
    suite = folder / "suite.toml"
    suite.write_text(CASE)
    evaluated = cli_here("eval", str(suite), "--model", "offline", "--quiet", COLUMNS="80")
    checked = cli_here("check", "--model", "offline", COLUMNS="80", cwd=folder)

    assert evaluated.returncode == 0, evaluated.stderr
    assert f"{suite}: 1/1 cases pass" in evaluated.stdout.splitlines()  # the title whole, on a line of its own
    descriptions = [line for line in checked.stdout.splitlines() if line.startswith("│ researcher ")]
    assert len(descriptions) == 1, checked.stdout  # a row on one line, however long its description


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_local_model_server_that_is_not_running_is_named_at_once(host: str) -> None:
    url = f"http://{host}:{closed_port()}/v1"
    run = cli_here("run", "--ephemeral", "--json", "--model", "openai:qwen2.5:7b", "Research bees",
                   OPENAI_BASE_URL=url)  # fmt: skip
    assert run.returncode == 1
    [failure] = json.loads(run.stdout)["failures"]
    assert f"nothing is listening at {url} (connection refused)" in failure["reason"], failure
    assert "OPENAI_BASE_URL" in failure["reason"]
    assert "attempts" not in failure["reason"]  # no retries of the SDK's: a refused port is said as it is
