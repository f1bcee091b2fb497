"""`mcp-team run` as a user runs it: a subprocess, offline and through the anthropic backend."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_team.cli.common import EXIT_PARTIAL
from mcp_team.handoffs import RunResult
from support import ADDER_TEAM, MCP_TEAM, clean_env, cli_here, run_cli
from support.fake_api import offline_brain
from support.fake_messages_api import SECRET, FakeMessagesAPI
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.process]

REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."


def test_offline_run_prints_the_answer_and_progress() -> None:
    proc = run_cli("run", "--model", "offline", "--ephemeral", REQUEST)

    assert proc.returncode == 0, proc.stderr
    assert "offline backend" in proc.stderr and "no LLM is called" in proc.stderr
    assert "12*(3+4)/2 = 42" in proc.stdout
    # Said once at the top and once where the writer's draft ends, not once more per finding it quotes.
    assert proc.stdout.count("no LLM is called") == 2, proc.stdout
    for name in ("researcher", "analyst", "writer", "reviewer"):
        assert re.search(rf"→ h\d+ {name}", proc.stderr) and re.search(rf"✓ h\d+ {name}", proc.stderr)
    assert "complete: 4 handoffs" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_runs_notes_are_said_after_its_summary() -> None:
    # A run's notes (what to change: a budget that cut a fan-out, a cost budget that could not count every call,
    # a fallback that answered) were in --json and MCP results only: on a terminal a partial run did not say why.
    proc = cli_here("run", "--model", "offline", "--ephemeral", "--max-handoffs", "1", REQUEST)
    assert proc.returncode == EXIT_PARTIAL, proc.stderr
    assert "partial: 2 handoffs" in proc.stderr, proc.stderr
    note = proc.stderr[proc.stderr.index("partial: 2 handoffs") :].splitlines()[1]
    assert note.startswith("note: 1 of the 2 handoffs asked for in one turn were not started"), proc.stderr
    assert "the team file's [supervisor.budgets]" in note, note  # its brackets are text, not markup


def test_json_output_is_the_structured_run_result() -> None:
    proc = run_cli("run", "--model", "offline", "--json", "--quiet", "--mode", "planned", REQUEST)

    assert proc.returncode == 0, proc.stderr
    result = RunResult.model_validate_json(proc.stdout)
    assert result.status == "complete" and result.mode == "planned"
    assert [h.target for h in result.handoffs] == ["researcher", "analyst", "writer", "reviewer"]
    assert result.plan is not None and len(result.plan.tasks) == 4
    assert proc.stderr.strip().splitlines() == [
        "mcp-team: offline backend: deterministic answers, no LLM is called",
        f"mcp-team: run {result.run_id} (see: mcp-team runs show {result.run_id})",  # to find it after a crash
    ]


def test_no_model_configured_is_a_clear_error_listing_the_options() -> None:
    proc = run_cli("run", "Research bees")
    assert proc.returncode == 2
    assert "no model is configured" in proc.stderr
    for option in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "--model offline", "sampling"):
        assert option in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_bad_input_gets_a_clear_error() -> None:
    assert "the request is empty" in cli_here("run", "--model", "offline", "  ").stderr
    budget = run_cli("run", "--model", "offline", "--max-handoffs", "0", "x")  # one in a process of its own
    assert (
        budget.returncode == 2 and "--max-handoffs" in budget.stderr and "greater than or equal to 1" in budget.stderr
    )
    fault = cli_here("run", "--model", "offline", "--fault", "meteor", "x")
    assert fault.returncode == 2 and "bad fault 'meteor'" in fault.stderr and "rate_limit" in fault.stderr
    nobody = cli_here("run", "--model", "offline", "--fault", "rate_limit:nobody:1", "x")  # would never happen
    assert nobody.returncode == 2 and "rate_limit:nobody names no member of this team" in nobody.stderr
    assert all("Traceback" not in p.stderr for p in (budget, fault))


def test_what_would_fail_after_the_run_is_refused_before_it(tmp_path: Path) -> None:
    # Each a usage error before any model call: a request that is not UTF-8 (a terminal in Latin-1), a trace
    # file that cannot be written, a deadline past what a date can hold, a flag named by its name.
    cases = [
        (["Research \udcff bees"], "the request is not valid UTF-8 text"),
        (["--jaeger-json", str(tmp_path), "x"], f"--jaeger-json {tmp_path}: is a directory; give a file name"),
        (["--jaeger-json", str(Path(__file__) / "t.json"), "x"], f"{Path(__file__)} is a file, not a directory"),
        (["--deadline", "1e12", "x"], "--deadline: Input should be less than or equal to 31536000"),
        (["--deadline", "-1", "x"], "--deadline: Input should be greater than 0"),
        (
            ["--call-timeout", "1e9", "x"],
            "--call-timeout / MCP_TEAM_CALL_TIMEOUT: must be a positive number of seconds, at most 86400 (a day)",
        ),
    ]
    for i, (args, message) in enumerate(cases):
        # the request that is not UTF-8 as a terminal gives it, to a process of its own; the rest here
        proc = (run_cli if i == 0 else cli_here)("run", "--model", "offline", *args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == "", args
    nested = tmp_path / "new" / "dir" / "trace.json"  # a directory that is not there yet is made, as --record's
    proc = run_cli("run", "--model", "offline", "--ephemeral", "--quiet", "--jaeger-json", str(nested), "Research bees")
    assert proc.returncode == 0 and json.loads(nested.read_text())["resourceSpans"], proc.stderr


def test_a_fault_may_target_the_planner() -> None:
    args = ["run", "--model", "offline", "--ephemeral", "--mode", "planned", "--fault", "rate_limit:planner:1"]
    proc = cli_here(*args, "Research bees")  # in this process: what the run says is the subject
    assert proc.returncode == 0, proc.stderr
    assert "the planner's model call failed (rate_limited); retrying" in proc.stderr
    assert "conflict" in cli_here("run", "--help").stdout  # every fault kind is in the help


def test_a_bad_environment_variable_is_named_as_it_was_set() -> None:
    # one in a process of its own, the rest here
    rate = run_cli("run", "--model", "offline", "x", env={"MCP_TEAM_REQUESTS_PER_MINUTE": "abc"})
    assert rate.returncode == 2 and "invalid settings: MCP_TEAM_REQUESTS_PER_MINUTE: " in rate.stderr, rate.stderr
    hot = {"MCP_TEAM_SUPERVISOR_SAMPLING": '{"temperature": "hot"}'}
    sampling = cli_here("run", "--model", "offline", "x", **hot)
    assert sampling.returncode == 2 and "MCP_TEAM_SUPERVISOR_SAMPLING.temperature: " in sampling.stderr
    prices = cli_here("run", "--model", "offline", "x", MCP_TEAM_PRICES="nope")
    assert prices.returncode == 2 and "invalid settings: MCP_TEAM_PRICES is not valid JSON" in prices.stderr
    port = cli_here("serve", "--http", "--model", "offline", "--ephemeral", MCP_TEAM_PORT="99999")
    assert port.returncode == 2 and "invalid settings: --port / MCP_TEAM_PORT: " in port.stderr, port.stderr
    runs = cli_here("serve", "--http", "--model", "offline", "--ephemeral", MCP_TEAM_MAX_RUNS="abc")
    assert runs.returncode == 2 and "invalid settings: MCP_TEAM_MAX_RUNS: " in runs.stderr, runs.stderr
    # Set by a variable, not a flag: named as the variable (it was `argument --call-timeout: invalid float value`,
    # with the whole usage); a setting a flag sets too names both; a validator's words come without pydantic's.
    timeout = cli_here("run", "--model", "offline", "x", MCP_TEAM_CALL_TIMEOUT="abc")
    problem = "invalid settings: --call-timeout / MCP_TEAM_CALL_TIMEOUT: Input should be a valid number"
    assert timeout.returncode == 2 and problem in timeout.stderr, timeout.stderr
    assert "usage:" not in timeout.stderr
    model = cli_here("run", "--model", "nonsense", "x")
    assert "invalid settings: --model / MCP_TEAM_MODEL: 'nonsense' names no provider" in model.stderr, model.stderr
    assert "Value error" not in model.stderr
    # A setting two variables may set is named by the one that was set (it named MCP_TEAM_OPENAI_BASE_URL for
    # an OPENAI_BASE_URL written without its scheme).
    url = cli_here("run", "x", OPENAI_BASE_URL="localhost:11434/v1")
    assert url.returncode == 2 and "invalid settings: OPENAI_BASE_URL: 'localhost:11434/v1'" in url.stderr, url.stderr
    ours = cli_here("run", "x", MCP_TEAM_OPENAI_BASE_URL="localhost:11434/v1")
    assert "invalid settings: MCP_TEAM_OPENAI_BASE_URL: 'localhost" in ours.stderr, ours.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_run_stopped_by_a_signal_is_cancelled_and_printed(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM left the run `running` (and the next command resumed it in silence); Ctrl-C with --json printed
    nothing. Both now cancel the run, record it cancelled and print what it had done, exit 130."""
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path), MCP_TEAM_OFFLINE_LATENCY_MS="1000")
    proc = subprocess.Popen([MCP_TEAM, "run", "--model", "offline", "--json", REQUEST], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # the run is under way once its first handoff starts
        if "→ h1" in line:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    result = RunResult.model_validate_json(out)
    assert result.status == "cancelled" and result.handoffs, result
    assert re.search(r"cancelled: \d+ handoffs?, \d+ model calls?, ", err), err
    shown = cli_here("runs", "show", result.run_id, "--json", MCP_TEAM_STATE_DIR=str(tmp_path))
    assert json.loads(shown.stdout)["status"] == "cancelled", shown.stdout
    assert "ERROR" not in err and "Traceback" not in err, err


def test_a_call_timeout_names_the_timeout_as_set_and_how_to_raise_it(tmp_path: Path) -> None:
    # a durable run's step is cut a little earlier (0.45 s here): the message said that figure, and no setting
    proc = run_cli("run", "--model", "offline", "--offline-latency-ms", "1500", "--call-timeout", "0.5", "--json",
                   "--quiet", "Research bees", env={"MCP_TEAM_STATE_DIR": str(tmp_path)})  # fmt: skip
    reasons = [f.reason for f in RunResult.model_validate_json(proc.stdout).failures]
    assert any("took longer than 0.5 s; raise the call timeout (MCP_TEAM_CALL_TIMEOUT" in r for r in reasons), reasons


def test_a_run_resuming_an_earlier_killed_one_says_so(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path), MCP_TEAM_OFFLINE_LATENCY_MS="1000")
    killed = subprocess.Popen([MCP_TEAM, "run", "--model", "offline", REQUEST], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert killed.stderr is not None
    run_id = ""
    for line in killed.stderr:
        run_id = run_id or (line.split("mcp-team: run ", 1)[1].split()[0] if "mcp-team: run " in line else "")
        if "→ h1" in line:
            break
    killed.kill()
    killed.communicate()
    state = {"MCP_TEAM_STATE_DIR": str(tmp_path), "MCP_TEAM_OFFLINE_LATENCY_MS": "1000"}
    again = run_cli("run", "--model", "offline", "--quiet", "A haiku", env=state)
    assert f"mcp-team: also resuming 1 unfinished run(s) an earlier process left: {run_id}" in again.stderr, (
        again.stderr
    )
    # The resumed run has more calls left than the new one makes: when the command ends first, it says so.
    left = json.loads(cli_here("runs", "show", run_id, "--json", **state).stdout)["status"] == "running"
    told = f"1 earlier run(s) did not finish before this one: {run_id}; they go on at the next" in again.stderr
    assert left == told, again.stderr


def test_partial_run_exits_3_and_lists_what_is_missing() -> None:
    # in this process: the exit code and what is said are the subject
    args = ["run", "--model", "offline", "--ephemeral", "--fault", "server_error:researcher"]
    proc = cli_here(*args, "Research bees, calculate 2+2")
    assert proc.returncode == 3, proc.stderr
    assert "Incomplete. This answer is missing:" in proc.stdout and "researcher" in proc.stdout
    assert "✗" in proc.stderr and "server_error" in proc.stderr


def test_run_through_the_anthropic_backend_against_a_local_messages_api() -> None:
    with FakeMessagesAPI(brain=offline_brain) as api:
        env = {"ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": api.base_url}
        proc = run_cli("run", "--ephemeral", "--json", REQUEST, env=env)
        bodies = list(api.requests)

    assert proc.returncode == 0, proc.stderr
    result = RunResult.model_validate_json(proc.stdout)
    assert result.status == "complete"
    assert "12*(3+4)/2 = 42" in result.answer
    models = {b["model"] for b in bodies}
    assert models == {"claude-sonnet-5-5", "claude-haiku-5-5"}  # supervisor and specialists, per role
    supervisor_calls = [b for b in bodies if b["model"] == "claude-sonnet-5-5"]
    assert any(t["name"] == "handoff_to_researcher" for t in supervisor_calls[0]["tools"])
    assert supervisor_calls[0]["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert result.usage.model_calls == len(bodies)
    assert "offline backend" not in proc.stderr  # it is the anthropic backend, not the offline one
    assert SECRET not in proc.stdout + proc.stderr


def test_anthropic_backend_failure_is_reported_without_the_key() -> None:
    # in this process: the anthropic backend is run in a process of its own above
    with FakeMessagesAPI() as api:
        for _ in range(2):
            api.reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
        env = {"ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": api.base_url}
        proc = cli_here("run", "--ephemeral", "--json", "Research bees", **env)

    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "failed"
    assert result["failures"][0]["kind"] == "auth" and "ANTHROPIC_API_KEY" in result["failures"][0]["reason"]
    assert SECRET not in proc.stdout + proc.stderr


OPENAI_SECRET = "sk-proj-test-SECRET-0123456789"


def test_run_through_the_openai_backend_against_a_local_chat_completions_api() -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:
        env = {"OPENAI_API_KEY": OPENAI_SECRET, "OPENAI_BASE_URL": api.base_url}
        proc = run_cli("run", "--ephemeral", "--json", "--model", "openai:gpt-4o-mini", REQUEST, env=env)
        bodies = list(api.requests)

    assert proc.returncode == 0, proc.stderr
    result = RunResult.model_validate_json(proc.stdout)
    assert result.status == "complete"
    assert "12*(3+4)/2 = 42" in result.answer
    assert {b["model"] for b in bodies} == {"gpt-4o-mini"}  # --model with a name: every role's model
    assert result.usage.model_calls == len(bodies)
    assert "offline backend" not in proc.stderr
    assert OPENAI_SECRET not in proc.stdout + proc.stderr


def test_a_local_server_needs_only_a_base_url_and_model_names() -> None:
    # in this process: the openai backend is run in a process of its own above
    with FakeOpenAIAPI(brain=offline_brain, parallel=False, usage=False) as api:
        env = {
            "OPENAI_BASE_URL": api.base_url,
            "MCP_TEAM_SUPERVISOR_MODEL": "openai:qwen2.5:7b",
            "MCP_TEAM_SPECIALIST_MODEL": "openai:llama3.2:3b",
        }
        proc = cli_here("run", "--ephemeral", REQUEST, **env)
        bodies = list(api.requests)

    assert proc.returncode == 0, proc.stderr
    assert {b["model"] for b in bodies} == {"qwen2.5:7b", "llama3.2:3b"}
    assert "reports no token usage" in proc.stderr  # said once, so token budgets are not trusted blindly
    assert proc.stderr.count("reports no token usage") == 2  # once per model
    assert "complete: 4 handoffs" in proc.stderr


def test_supervisor_on_anthropic_and_specialists_on_openai() -> None:
    # in this process: each backend is run in a process of its own above
    with FakeMessagesAPI(brain=offline_brain) as claude, FakeOpenAIAPI(brain=offline_brain) as gpt:
        env = {
            "ANTHROPIC_API_KEY": SECRET,
            "ANTHROPIC_BASE_URL": claude.base_url,
            "OPENAI_API_KEY": OPENAI_SECRET,
            "OPENAI_BASE_URL": gpt.base_url,
            "MCP_TEAM_SPECIALIST_MODEL": "openai:gpt-4o-mini",
        }
        proc = cli_here("run", "--ephemeral", "--json", REQUEST, **env)
        supervisor_bodies, specialist_bodies = list(claude.requests), list(gpt.requests)

    assert proc.returncode == 0, proc.stderr
    result = RunResult.model_validate_json(proc.stdout)
    assert result.status == "complete"
    assert {b["model"] for b in supervisor_bodies} == {"claude-sonnet-5-5"}  # ANTHROPIC_API_KEY wins the default
    assert {b["model"] for b in specialist_bodies} == {"gpt-4o-mini"}
    assert all(any(t["name"] == "finalize" for t in b["tools"]) for b in supervisor_bodies)
    assert result.usage.model_calls == len(supervisor_bodies) + len(specialist_bodies)
    assert SECRET not in proc.stdout + proc.stderr and OPENAI_SECRET not in proc.stdout + proc.stderr


def test_a_model_without_a_provider_is_a_usage_error() -> None:
    proc = run_cli("run", "--model", "qwen2.5:7b", "x")
    assert proc.returncode == 2
    assert "unknown provider 'qwen2.5'" in proc.stderr and "openai:qwen2.5:7b" in proc.stderr
    assert "Traceback" not in proc.stderr


# Run in a child: which of the MCP SDK's modules each command imported, the commands one after another in the
# child (its stderr's `modules after ...:` lines). A module stays imported: a command's list holds the ones before.
_MCP_MODULES_AFTER = """
import json, sys
from mcp_team.cli.main import main
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit:
        pass
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
    print("modules after", json.dumps(args) + ":", json.dumps(loaded), file=sys.stderr)
"""


def _mcp_modules_after(cwd: Path, *commands: list[str]) -> dict[str, list[str]]:
    """Each command's `" ".join(args)`, and the MCP SDK's modules imported once it (and those before it) ran,
    in `cwd` (empty: a team.toml found there would be used)."""
    proc = subprocess.run(
        [sys.executable, "-c", _MCP_MODULES_AFTER, json.dumps(commands)], capture_output=True, text=True,
        timeout=60, env=clean_env(), cwd=cwd,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    listed = {}
    for line in proc.stderr.splitlines():
        if line.startswith("modules after "):
            args, _, loaded = line.removeprefix("modules after ").partition(": ")
            listed[" ".join(json.loads(args))] = list(json.loads(loaded))
    assert len(listed) == len(commands), proc.stderr
    return listed


def test_commands_that_talk_to_no_mcp_server_start_without_the_mcp_sdk(tmp_path: Path) -> None:
    # Importing the SDK is about half a second of every start: `run` of a team without MCP servers and `runs`
    # (which reads the store) have no use for it.
    (tmp_path / "team.toml").write_text(ADDER_TEAM)  # not in the commands' directory: found there, it is used
    (tmp_path / "empty").mkdir()
    run = ["run", "--model", "offline", "Calculate 2+2"]
    # a team that names an MCP server gets the client for it (last: what it imports stays)
    team = ["run", "--ephemeral", "--team", str(tmp_path / "team.toml"), "--model", "offline", "add 2 and 2"]
    loaded = _mcp_modules_after(tmp_path / "empty", run, ["runs", "list"], team)
    assert loaded["run --model offline Calculate 2+2"] == []
    assert loaded["runs list"] == []
    assert "mcp.client.stdio" in loaded[" ".join(team)]


def test_flags_that_would_be_ignored_or_overflow_are_usage_errors(tmp_path: Path) -> None:
    cases = [
        (["runs", "--limit", "99999999999999999999"], ["--limit must be between 1 and 1,000,000"]),
        (["init", str(tmp_path / "no" / "team.toml")], [f"the directory {tmp_path / 'no'} does not exist"]),
        (["init", str(tmp_path)], [f"{tmp_path} is a directory; give a file name"]),
        # the command's usage, not `mcp-team COMMAND ...`
        (["run", "--bogus", "x"], ["usage: mcp-team run [-h]", "mcp-team run: error: unrecognized arguments: --bogus"]),
    ]
    env = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_STATE_DIR": str(tmp_path)}
    for args, words in cases:
        if args[0] == "run":  # an argparse error, in a process of its own; the rest here
            proc = subprocess.run([MCP_TEAM, *args], capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL, env=clean_env(**env))  # fmt: skip
        else:
            proc = cli_here(*args, **env)
        for says in words:
            assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    # Said, not refused: a client's config with a stray --port must still start its stdio server.
    stray = subprocess.run([MCP_TEAM, "serve", "--port", "9999"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL, env=clean_env(MCP_TEAM_MODEL="offline"))  # fmt: skip
    assert stray.returncode == 0 and "--port applies only with --http: serving over stdio" in stray.stderr
