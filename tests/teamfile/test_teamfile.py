"""Team files: validation errors, init/check, serving a file's team, reload on edit, external MCP tools."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_team.handoffs import Team
from mcp_team.handoffs.turn import HANDOFF_PREFIX
from mcp_team.llm import ModelSet, ToolResultBlock
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import load_team_file
from mcp_team.teamfile.schema import TeamFileError
from support import ADDER_TEAM, HANG_GUARD, MCP_TEAM, RUN_TOOLS, clean_env, cli_here, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


ONE_SPECIALIST = """
[[specialists]]
name = "poet"
description = "Writes short poems."
prompt = "Write a short poem about the task."
"""


def write(tmp_path: Path, body: str, name: str = "team.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def problems(tmp_path: Path, body: str) -> str:
    path = write(tmp_path, body)
    with pytest.raises(TeamFileError) as info:
        load_team_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid team file:"), message  # every error names the file
    return message


# --- one test per kind of error -------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TeamFileError, match=r"does not exist.*mcp-team init"):
        load_team_file(tmp_path / "nope.toml")


def test_not_toml(tmp_path: Path) -> None:
    assert "not valid TOML" in problems(tmp_path, "[[specialists]\nname = ")


def test_unknown_key_names_its_path(tmp_path: Path) -> None:
    message = problems(tmp_path, "[supervisor]\nmax_retry = 3\n" + ONE_SPECIALIST)
    assert "supervisor.max_retry: unknown key" in message


def test_wrong_type_names_its_path(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'max_turns = "lots"\n')
    assert "specialists[0].max_turns: Input should be a valid integer" in message


def test_a_model_string_of_no_provider_is_refused_for_a_role_too(tmp_path: Path) -> None:
    message = problems(tmp_path, '[models]\nsupervisor = "foo:bar"\nspecialist_fallback = "nope:x"\n' + ONE_SPECIALIST)
    assert "models.supervisor: unknown provider 'foo'" in message, message
    assert "models.specialist_fallback: unknown provider 'nope'" in message, message


def test_name_that_is_not_a_valid_tool_name(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST.replace('"poet"', '"the poet!"'))
    assert "specialists[0].name: 'the poet!' cannot be a name: use 1 to 53 letters, digits, _ or -" in message


def test_a_name_whose_handoff_tool_a_model_api_would_refuse(tmp_path: Path) -> None:
    # The supervisor calls it as `handoff_to_<name>`: model APIs refuse tool names over 64 characters.
    message = problems(tmp_path, ONE_SPECIALIST.replace('"poet"', f'"{"p" * 54}"'))
    assert f"specialists[0].name: '{'p' * 54}' cannot be a name: use 1 to 53" in message
    spec = load_team_file(write(tmp_path, ONE_SPECIALIST.replace('"poet"', f'"{"p" * 53}"')))
    assert len(HANDOFF_PREFIX + spec.names[0]) == 64


@pytest.mark.parametrize("name", ["get_run", "start_run", "cancel_run", "answer_checkpoint", "planner"])
def test_names_of_the_servers_own_tools_and_members_are_taken(tmp_path: Path, name: str) -> None:
    message = problems(tmp_path, ONE_SPECIALIST.replace('"poet"', f'"{name}"'))
    assert f"specialists[0].name: '{name}' is taken by the server" in message


def test_a_deadline_beyond_a_year_is_refused_by_check_not_by_the_run(tmp_path: Path) -> None:
    message = problems(tmp_path, "[supervisor.budgets]\ndeadline_seconds = 1e12\n" + ONE_SPECIALIST)
    assert "deadline_seconds: Input should be less than or equal to 31536000" in message


def test_a_file_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_bytes(b"\xef\xbb\xbf" + ONE_SPECIALIST.encode())
    assert load_team_file(path).names == ["poet"]


def test_a_prompt_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "poet.md").write_bytes(b"Write a caf\xe9 poem.")
    body = ONE_SPECIALIST.replace('prompt = "Write a short poem about the task."', 'prompt_file = "poet.md"')
    message = problems(tmp_path, body)
    assert "specialists[0].prompt_file: 'poet.md' is not UTF-8 text (byte 11); save it as UTF-8" in message


def test_duplicate_name(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + ONE_SPECIALIST)
    assert "specialists[1].name: 'poet' is used by another specialist" in message


def test_reserved_name(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST.replace('"poet"', '"run_team"'))
    assert "specialists[0].name: 'run_team' is taken by the server" in message


def test_unknown_tool(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'tools = ["calculate", "telepathy"]\n')
    assert "specialists[0].tools[1]: unknown tool 'telepathy'; built-in tools are calculate, fetch_url" in message


def test_tool_of_an_undeclared_mcp_server(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'tools = ["search/web"]\n')
    assert "specialists[0].tools[0]: 'search/web' names MCP server 'search', which is not declared" in message


def test_tool_not_allowed_by_its_mcp_server(tmp_path: Path) -> None:
    servers = '[[mcp_servers]]\nname = "echo"\ncommand = "x"\nallowed_tools = ["echo"]\n'
    message = problems(tmp_path, servers + ONE_SPECIALIST + 'tools = ["echo/add"]\n')
    assert "specialists[0].tools[0]: 'add' is not in mcp_servers 'echo' allowed_tools (echo)" in message


def test_mcp_server_needs_exactly_one_transport(tmp_path: Path) -> None:
    message = problems(
        tmp_path, '[[mcp_servers]]\nname = "x"\ncommand = "a"\nurl = "http://127.0.0.1:1/mcp"\n' + ONE_SPECIALIST
    )
    assert "mcp_servers[0]" in message and "command" in message and "url" in message


def test_missing_prompt_file(tmp_path: Path) -> None:
    body = ONE_SPECIALIST.replace('prompt = "Write a short poem about the task."', 'prompt_file = "poet.md"')
    message = problems(tmp_path, body)
    assert "specialists[0].prompt_file: cannot read 'poet.md'" in message and str(tmp_path / "poet.md") in message


def test_prompt_and_prompt_file_together(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'prompt_file = "poet.md"\n')
    assert "specialists[0]: give exactly one of `prompt` (inline) or `prompt_file`" in message


def test_no_specialists(tmp_path: Path) -> None:
    assert "specialists: is required" in problems(tmp_path, "[supervisor]\nmode = 'planned'\n")


def test_file_tools_without_directories(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'tools = ["read_file"]\n')
    assert "specialists[0].tools: read_file/list_files are granted but tools.read_dirs is empty" in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    message = problems(tmp_path, ONE_SPECIALIST + 'tools = ["telepathy"]\n' + ONE_SPECIALIST)
    assert "unknown tool 'telepathy'" in message and "'poet' is used by another specialist" in message


def test_prompt_file_is_read_relative_to_the_team_file(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "poet.md").write_text("Rhyme everything.\n")
    body = ONE_SPECIALIST.replace('prompt = "Write a short poem about the task."', 'prompt_file = "prompts/poet.md"')
    (poet,) = load_team_file(write(tmp_path, body)).build()
    assert poet.system_prompt == "Rhyme everything."


# --- init and check -------------------------------------------------------------------------------


def test_init_writes_the_default_team_and_check_accepts_it(tmp_path: Path) -> None:
    init = run_cli("init", cwd=tmp_path)  # the module's one team command in a process of its own
    assert init.returncode == 0, init.stderr
    team = load_team_file(tmp_path / "team.toml").build()
    for ours, default in zip(team, DEFAULT_TEAM, strict=True):
        assert (ours.name, ours.description, ours.system_prompt, ours.max_turns, ours.returns_verdict) == (
            default.name,
            default.description,
            default.system_prompt,
            default.max_turns,
            default.returns_verdict,
        )
        assert [t.name for t in ours.tools] == [t.name for t in default.tools]
    assert "# mcp-team team file" in (tmp_path / "team.toml").read_text()

    check = cli_here("check", cwd=tmp_path)  # finds ./team.toml by itself
    assert check.returncode == 0, check.stderr
    for name in ("researcher", "analyst", "writer", "coder", "reviewer", "calculate"):
        assert name in check.stdout

    again = cli_here("init", cwd=tmp_path)
    assert again.returncode == 2 and "already exists; pass --force" in again.stderr


def test_init_presets(tmp_path: Path) -> None:
    listing = cli_here("init", "--list", cwd=tmp_path)
    assert listing.stdout.split() == [
        "competitive-intelligence",
        "patient-case",
        "portfolio",
        "curriculum",
        "product-launch",
        "contract-review",
        "research-desk",
    ]
    made = cli_here("init", "--preset", "portfolio", "mine.toml", cwd=tmp_path)
    assert made.returncode == 0 and load_team_file(tmp_path / "mine.toml").build()
    bad = cli_here("init", "--preset", "astrology", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown preset 'astrology'" in bad.stderr
    (tmp_path / "team.toml").write_text("", encoding="utf-8")  # over a file: the unknown preset is said first
    again = cli_here("init", "--preset", "astrology", cwd=tmp_path)
    assert again.returncode == 2 and "unknown preset 'astrology'" in again.stderr


def test_check_rejects_an_invalid_file(tmp_path: Path) -> None:
    write(tmp_path, ONE_SPECIALIST + 'tools = ["telepathy"]\n', "bad.toml")
    check = cli_here("check", "bad.toml", cwd=tmp_path)
    assert check.returncode == 2
    assert "bad.toml: invalid team file" in check.stderr and "unknown tool 'telepathy'" in check.stderr
    assert "Traceback" not in check.stderr


def test_check_takes_team_like_run_and_serve(tmp_path: Path) -> None:
    write(tmp_path, ONE_SPECIALIST, "poets.toml")
    write(tmp_path, ONE_SPECIALIST + 'tools = ["telepathy"]\n', "bad.toml")

    good = cli_here("check", "--team", "poets.toml", cwd=tmp_path)
    bad = cli_here("check", "--team", "bad.toml", cwd=tmp_path)
    both = cli_here("check", "poets.toml", "--team", "bad.toml", cwd=tmp_path)

    assert good.returncode == 0, good.stderr
    assert "poets.toml: 1 specialists" in good.stdout and "poet" in good.stdout
    assert bad.returncode == 2 and "unknown tool 'telepathy'" in bad.stderr
    assert both.returncode == 2 and "two team files given" in both.stderr
    assert all("Traceback" not in p.stderr for p in (good, bad, both))


# --- serving a team file --------------------------------------------------------------------------


async def test_file_specialists_are_tools_and_prompts_like_built_in_ones(tmp_path: Path) -> None:
    server = build_server(ModelSettings(model="offline"), load_team_file(write(tmp_path, ONE_SPECIALIST)))
    async with Client(server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        result = await client.call_tool("poet", {"task": "autumn"})
        run = await client.call_tool("run_team", {"request": "A poem about autumn"})
    assert tools == {"run_team", "plan_team", "poet", *RUN_TOOLS} and prompts == {"supervisor", "poet"}
    assert (
        result.structured_content["status"] == "completed" and "[offline poet]" in result.structured_content["output"]
    )
    assert [h["target"] for h in run.structured_content["handoffs"]] == ["poet"]


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_edit_reloads_the_team_and_clients_hear_of_it(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, ONE_SPECIALIST)
    server = build_server(ModelSettings(model="offline"), load_team_file(path), watch=True)
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(server, mode=mode, message_handler=on_message, cache=None) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"run_team", "plan_team", "poet", *RUN_TOOLS}

        with caplog.at_level(logging.ERROR, logger="mcp_team.server"):
            path.write_text(ONE_SPECIALIST + "tools = [", encoding="utf-8")  # a broken edit
            with anyio.fail_after(HANG_GUARD):
                while "keeping the current team" not in caplog.text:  # noqa: ASYNC110 - only the log tells
                    await anyio.sleep(0.05)
        assert "not valid TOML" in caplog.text and "keeping the current team" in caplog.text
        assert {t.name for t in (await client.list_tools()).tools} == {"run_team", "plan_team", "poet", *RUN_TOOLS}

        bard = ONE_SPECIALIST.replace("poet", "bard")
        if mode == "auto":
            async with client.listen(tools_list_changed=True) as subscription:
                path.write_text(ONE_SPECIALIST + bard, encoding="utf-8")
                with anyio.fail_after(HANG_GUARD):
                    async for _event in subscription:
                        changed.set()
                        break
        else:
            path.write_text(ONE_SPECIALIST + bard, encoding="utf-8")
        with anyio.fail_after(HANG_GUARD):
            await changed.wait()
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"run_team", "plan_team", "poet", "bard", *RUN_TOOLS}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"supervisor", "poet", "bard"}


# --- tools from other MCP servers -------------------------------------------------------------------


def _adder_run_models() -> tuple[ScriptedModel, ScriptedModel]:
    supervisor = ScriptedModel(
        [
            tool_calls(("handoff_to_adder", {"task": "add 2 and 3"}), ("handoff_to_poet", {"task": "a haiku"})),
            tool_calls(("finalize", {"answer": "done"})),
        ]
    )

    def specialist_step(request):  # type: ignore[no-untyped-def]
        if "add your numbers" in request.system or "Add the numbers" in request.system:
            last = request.messages[-1].blocks[-1]
            if isinstance(last, ToolResultBlock):
                return text(f"the sum is {last.content}" if not last.is_error else f"could not add: {last.content}")
            return tool_calls(("add", {"a": 2, "b": 3}))
        return text("autumn leaves / falling")

    specialist = ScriptedModel([specialist_step] * 3)
    return supervisor, specialist


async def test_a_specialist_calls_a_tool_of_an_external_mcp_server(tmp_path: Path, spans) -> None:
    spec = load_team_file(write(tmp_path, ADDER_TEAM))
    supervisor, specialist = _adder_run_models()
    async with spec.mcp_pool() as pool:
        assert pool is not None
        adder, poet = spec.build(pool)
        assert [t.name for t in adder.tools] == ["add"] and poet.tools == ()
        team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: specialist}), spec.build(pool), spec.run_settings)
        result = await team.run("Add 2 and 3, and write a haiku")

    assert result.status == "complete"
    adder_record = next(h for h in result.handoffs if h.target == "adder")
    assert adder_record.output == "the sum is 5"
    assert spans.one("execute_tool add").parent.span_id == spans.one("invoke_agent adder").context.span_id


async def test_a_dead_external_server_fails_only_the_tools_that_need_it(tmp_path: Path) -> None:
    dead = ADDER_TEAM.replace(json.dumps(sys.executable), json.dumps("/nonexistent/python"))
    assert dead != ADDER_TEAM
    spec = load_team_file(write(tmp_path, dead))
    supervisor, specialist = _adder_run_models()
    async with spec.mcp_pool() as pool:
        assert pool is not None and pool.status()["echo"] != "running"
        team = Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: specialist}), spec.build(pool), spec.run_settings)
        result = await team.run("Add 2 and 3, and write a haiku")

    adder_record = next(h for h in result.handoffs if h.target == "adder")
    poet_record = next(h for h in result.handoffs if h.target == "poet")
    assert adder_record.output.startswith("could not add:") and "echo" in adder_record.output
    assert poet_record.status == "completed" and poet_record.output == "autumn leaves / falling"


async def test_served_team_reports_its_external_servers(tmp_path: Path) -> None:
    import json

    server = build_server(ModelSettings(model="offline"), load_team_file(write(tmp_path, ADDER_TEAM)))
    async with Client(server) as client:
        team = json.loads((await client.read_resource("team://specialists")).contents[0].text)
        tools = {t.name for t in (await client.list_tools()).tools}
    assert team["mcp_servers"] == {"echo": "running"}
    assert {"adder", "poet"} <= tools
    assert next(s for s in team["specialists"] if s["name"] == "adder")["tools"] == ["add"]


def test_a_tool_the_mcp_server_does_not_offer_is_a_clear_error(tmp_path: Path) -> None:
    body = ADDER_TEAM.replace('allowed_tools = ["add", "echo"]\n', "").replace('"echo/add"', '"echo/multiply"')
    write(tmp_path, body)
    # --ephemeral: what is said of the tool comes before a run, durable or not (DBOS is a process's, not a test's).
    proc = cli_here("run", "--ephemeral", "--model", "offline", "Add 2 and 3", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "specialist adder" in proc.stderr and "multiply" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_init_force_overwrites(tmp_path: Path) -> None:
    write(tmp_path, ONE_SPECIALIST)
    forced = cli_here("init", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert [s.name for s in load_team_file(tmp_path / "team.toml").build()] == [s.name for s in DEFAULT_TEAM]


async def test_serve_team_flag_serves_the_files_team_over_stdio(tmp_path: Path) -> None:
    from mcp import StdioServerParameters

    path = write(tmp_path, ONE_SPECIALIST, "poets.toml")
    params = StdioServerParameters(
        command=MCP_TEAM, args=["serve", "--team", str(path)], env=clean_env(MCP_TEAM_MODEL="offline")
    )
    async with Client(params, mode="legacy") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("poet", {"task": "the sea"})
    assert tools == {"run_team", "plan_team", "poet", *RUN_TOOLS}
    assert "[offline poet]" in result.structured_content["output"]
