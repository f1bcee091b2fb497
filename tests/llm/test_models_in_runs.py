"""Models in whole runs (issue 10): the cost of every call, handoff and run; per-endpoint limits; fallback
models; a model per specialist from the team file; a supervisor that writes its tool calls as text.

Through the library API and the `mcp-team` command, with the OpenAI-compatible backend on the real
`openai` SDK against the fake Chat Completions server (tests/support/fake_openai_api.py) over a real socket.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcp_team.handoffs import Budgets, Team
from mcp_team.llm import SPECIALIST, SUPERVISOR, Message, ModelRequest, ModelSet, ToolDefinition, chat
from mcp_team.llm.cost import usage_cost
from mcp_team.llm.limits import EndpointLimits, Limiters
from mcp_team.llm.openai import OpenAIModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.llm.text_calls import read_calls
from mcp_team.llm.wrappers import ToolCallsModel
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import load_team
from mcp_team.telemetry.attributes import FALLBACK_MODEL, OP_CHAT, USAGE_COST_USD
from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI, completion
from support.spans import Spans

pytestmark = [pytest.mark.process]

KEY = "sk-proj-test-SECRET-0123456789"
MODEL = "gpt-4o-mini"
REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MCP_TEAM_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gpt() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI(brain=offline_brain) as server:
        yield server


def on(api: FakeOpenAIAPI, *, priced: bool = True, max_retries: int = 0) -> OpenAIModel:
    """gpt-4o-mini at the fake server; `priced`: with OpenAI's prices (as MCP_TEAM_PRICES says for a gateway)."""
    return OpenAIModel(
        MODEL, api_key=KEY, base_url=api.base_url, max_retries=max_retries, price_provider="openai" if priced else None
    )


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_TEAM, *args], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(**env)
    )  # fmt: skip


# --- cost ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_priced_run_reports_the_cost_genai_prices_gives_on_every_call_handoff_and_the_run(
    gpt: FakeOpenAIAPI, spans: Spans
) -> None:
    result = await Team(ModelSet.single(on(gpt))).run(REQUEST)
    assert result.status == "complete", result.failures
    total = result.usage.total
    expected = usage_cost(total, MODEL, price_provider="openai")
    assert expected and total.cost_usd == pytest.approx(expected)  # prices are per token: the sum is the whole
    for h in result.handoffs:
        assert h.usage.cost_usd == pytest.approx(usage_cost(h.usage, MODEL, price_provider="openai"))
    chats = [s for s in spans.all if s.name.startswith(f"{OP_CHAT} ")]
    assert len(chats) == result.usage.model_calls
    assert sum(spans.attr(s, USAGE_COST_USD) for s in chats) == pytest.approx(total.cost_usd)


@pytest.mark.anyio
async def test_an_unknown_models_cost_is_null_not_zero(gpt: FakeOpenAIAPI, spans: Spans) -> None:
    result = await Team(ModelSet.single(on(gpt, priced=False))).run(REQUEST)  # a local server: no price list
    assert result.status == "complete"
    assert result.usage.total.cost_usd is None
    assert all(h.usage.cost_usd is None for h in result.handoffs)
    assert all(u.cost_usd is None for u in result.usage.by_specialist.values())
    assert not [s for s in spans.all if s.attributes and USAGE_COST_USD in s.attributes]


def test_the_cli_prints_the_cost_and_max_cost_winds_the_run_down(gpt: FakeOpenAIAPI) -> None:
    env = {"OPENAI_BASE_URL": gpt.base_url, "MCP_TEAM_PRICES": json.dumps({gpt.base_url: "openai"})}
    # The command's own process says the cost (the module's one `run` in a process); the capped run is the same
    # command, in this one.
    full = cli("run", "--json", "--ephemeral", "--model", f"openai:{MODEL}", REQUEST, **env)
    result = json.loads(full.stdout)
    cost = result["usage"]["total"]["cost_usd"]
    assert result["status"] == "complete" and cost > 0
    assert f"${cost:.4f}" in full.stderr  # the summary line, next to the tokens

    capped_run = cli_here(
        "run", "--json", "--ephemeral", "--model", f"openai:{MODEL}", "--max-cost", "0.0002", REQUEST, **env
    )
    capped = json.loads(capped_run.stdout)
    assert "cost budget ($0.0002)" in (capped["stopped_by"] or ""), capped["stopped_by"]
    assert capped["usage"]["total"]["cost_usd"] < cost
    assert capped["status"] in ("partial", "failed")


def test_the_cli_says_an_unknown_cost_is_unknown() -> None:
    proc = cli_here("run", "--ephemeral", "--model", "offline", "Research bees")
    assert "cost unknown" in proc.stderr and "$0" not in proc.stderr


def test_the_cli_says_the_cost_is_unknown_when_a_priced_gateway_counts_no_tokens() -> None:
    with FakeOpenAIAPI(brain=offline_brain, usage=False) as api:  # priced by OpenAI's list, but no `usage`
        env = {"OPENAI_BASE_URL": api.base_url, "MCP_TEAM_PRICES": json.dumps({api.base_url: "openai"})}
        proc = cli_here("run", "--ephemeral", "--model", f"openai:{MODEL}", REQUEST, **env)
    assert "complete:" in proc.stderr and "cost unknown" in proc.stderr and "$0" not in proc.stderr, proc.stderr
    assert "reports no token usage" in proc.stderr  # and why


def test_max_cost_on_a_priced_gateway_that_counts_no_tokens_says_it_could_not_count_them() -> None:
    """Such calls' cost is unknown: the cost budget cannot count them, and the run says so instead of calling it $0."""
    with FakeOpenAIAPI(brain=offline_brain, usage=False) as api:
        env = {"OPENAI_BASE_URL": api.base_url, "MCP_TEAM_PRICES": json.dumps({api.base_url: "openai"})}
        proc = cli_here(
            "run", "--json", "--ephemeral", "--model", f"openai:{MODEL}", "--max-cost", "0.5", REQUEST, **env
        )
    result = json.loads(proc.stdout)
    assert result["status"] == "complete" and result["usage"]["total"]["cost_usd"] is None
    (note,) = [n for n in result["notes"] if "cost budget" in n]
    calls = result["usage"]["model_calls"]
    assert f"The cost budget (max_cost $0.5) could not count {calls} model calls whose cost is unknown" in note
    assert "$0.0000 for the calls it could price" in note and "set max_model_calls" in note


@pytest.mark.anyio
@pytest.mark.parametrize(("priced", "max_cost"), [(True, 5.0), (False, None)])
async def test_a_run_says_nothing_of_unknown_costs_when_it_has_no_cost_budget_or_knows_every_cost(
    gpt: FakeOpenAIAPI, priced: bool, max_cost: float | None
) -> None:
    result = await Team(ModelSet.single(on(gpt, priced=priced))).run(REQUEST, budgets=Budgets(max_cost=max_cost))
    assert result.status == "complete"
    assert not [n for n in result.notes if "cost budget" in n]


@pytest.mark.anyio
async def test_a_cost_budget_counts_what_it_can_price_and_says_what_it_could_not(gpt: FakeOpenAIAPI) -> None:
    """A priced supervisor and specialists on a local server (no price): the note says how many calls it could not
    count, and what the ones it could cost."""
    with FakeOpenAIAPI(brain=offline_brain) as local:
        models = ModelSet({SUPERVISOR: on(gpt), SPECIALIST: on(local, priced=False)})
        result = await Team(models).run(REQUEST, budgets=Budgets(max_cost=5.0))
    assert result.status == "complete"
    (note,) = [n for n in result.notes if "cost budget" in n]
    priced = result.usage.by_specialist["supervisor"].cost_usd
    assert priced and f"counted ${priced:.4f} for the calls it could price" in note
    assert f"could not count {len(local.requests)} model calls whose cost is unknown" in note


def test_max_cost_is_refused_when_not_a_positive_number() -> None:
    proc = cli_here("run", "--ephemeral", "--model", "offline", "--max-cost", "-1", "Research bees")
    assert proc.returncode == 2 and "max-cost" in proc.stderr and "Traceback" not in proc.stderr


# --- limits per endpoint -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_supervisor_on_one_endpoint_never_waits_for_specialists_on_another(gpt: FakeOpenAIAPI) -> None:
    with FakeOpenAIAPI(brain=offline_brain) as other:
        supervisor, worker = on(gpt), on(other)
        models = ModelSet(
            {SUPERVISOR: supervisor, SPECIALIST: worker}, limits=Limiters(EndpointLimits(max_concurrency=1))
        )
        request = ModelRequest(system="s", messages=[Message(role="user", content=REQUEST)], member=SUPERVISOR)
        worker_slots = models.limiter_for(worker)
        assert worker_slots is not models.limiter_for(supervisor)
        with anyio.fail_after(HANG_GUARD):  # a hang guard: one shared limiter would wait here forever
            async with worker_slots.slot():  # the specialists' endpoint is full
                response = await chat(models, SUPERVISOR, request)
                assert worker_slots.calls.available_tokens == 0
    assert response.content and len(gpt.requests) == 1 and not other.requests


@pytest.mark.anyio
async def test_each_specialist_calls_its_own_model(gpt: FakeOpenAIAPI) -> None:
    analyst = next(s for s in DEFAULT_TEAM if s.name == "analyst").instructions
    with FakeOpenAIAPI(brain=offline_brain) as own:
        models = ModelSet.single(on(gpt))
        models.members = {"analyst": on(own)}
        result = await Team(models).run(REQUEST)
    assert result.status == "complete"
    assert own.requests and all(r["messages"][0]["content"] == analyst for r in own.requests)
    assert not [r for r in gpt.requests if r["messages"][0]["content"] == analyst]


# --- fallbacks ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_fallback_model_answers_when_the_primary_keeps_failing(spans: Spans) -> None:
    with FakeOpenAIAPI(brain=offline_brain) as down, FakeOpenAIAPI(brain=offline_brain) as backup:
        down.fail(503, "overloaded", times=1000)
        models = ModelSet.single(on(down))
        models.fallbacks = {SUPERVISOR: on(backup), SPECIALIST: on(backup)}
        result = await Team(models).run(REQUEST)
    assert result.status == "complete", result.failures
    assert backup.requests and all(h.fallback and "503" not in h.fallback for h in result.handoffs)
    assert all("answered for" in (h.fallback or "") for h in result.handoffs)
    assert any("fallback model answered" in n for n in result.notes)
    marked = [s for s in spans.all if s.attributes and FALLBACK_MODEL in s.attributes]
    assert {s.name.split(" ")[0] for s in marked} == {OP_CHAT, "execute_tool"}  # the calls and the handoffs


def test_fallbacks_from_the_environment_and_a_team_file(tmp_path: Path) -> None:
    with FakeOpenAIAPI() as down:
        down.fail(500, "boom", times=1000)
        team = tmp_path / "team.toml"
        team.write_text(
            '[models]\nsupervisor_fallback = "offline"\n\n'
            '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
            'fallback_model = "offline"\n'
        )
        env = {"OPENAI_BASE_URL": down.base_url, "MCP_TEAM_MAX_RETRIES": "0"}
        proc = cli_here(
            "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{MODEL}", "Research bees",
            **env,
        )  # fmt: skip
        checked = cli_here("check", "--team", str(team), **env)
    result = json.loads(proc.stdout)
    assert result["status"] == "complete", result["failures"]
    assert [h["fallback"] for h in result["handoffs"]] == [
        f"offline:offline answered for openai:{MODEL} (server_error)"
    ]
    assert "(fallback offline)" in checked.stdout and f"openai:{MODEL}" in checked.stdout


def test_check_shows_each_members_model(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        '[models]\nsupervisor = "openai:gpt-4o"\n\n'
        '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
        'model = "openai:qwen2.5:7b"\nbase_url = "http://127.0.0.1:11434/v1"\n\n'
        '[[specialists]]\nname = "writer"\ndescription = "Writes."\nprompt = "Write."\n'
    )
    proc = cli_here("check", "--team", str(team), OPENAI_API_KEY="sk-test")
    assert proc.returncode == 0, proc.stderr
    assert "openai:qwen2.5:7b at http://127.0.0.1:11434/v1" in proc.stdout
    assert "openai:gpt-4o-mini" in proc.stdout  # the writer: the specialists' default
    assert "supervisor (and planner): openai:gpt-4o" in proc.stdout


def test_a_rejected_key_is_named_where_it_was_set_with_the_model_it_was_for(tmp_path: Path) -> None:
    """A specialist on its own endpoint, its key in its own variable (a Groq key, say): a 401 names that
    variable, not OPENAI_API_KEY, which the user never set; a role's key, its MCP_TEAM_* variable."""
    with FakeOpenAIAPI(brain=offline_brain) as gateway, FakeOpenAIAPI() as groq:
        groq.fail(401, "Invalid API Key", type="invalid_request_error", code="invalid_api_key", times=10)
        groq_url = groq.base_url
        gateway.fail(401, "Invalid API Key", type="invalid_request_error", code="invalid_api_key", times=10)
        team = tmp_path / "team.toml"
        team.write_text(
            '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
            f'model = "openai:llama-3.1-8b-instant"\nbase_url = "{groq.base_url}"\napi_key_env = "GROQ_API_KEY"\n'
        )
        env = {"GROQ_API_KEY": "gsk_revoked", "MCP_TEAM_MAX_RETRIES": "0"}
        offline = {"MCP_TEAM_SUPERVISOR_MODEL": "offline", "MCP_TEAM_SPECIALIST_MODEL": "offline"}  # all but it
        proc = cli_here("run", "--json", "--ephemeral", "--team", str(team), "Research bees", **env, **offline)
        supervisor = cli_here(
            "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{MODEL}", "Research bees",
            OPENAI_BASE_URL=gateway.base_url, MCP_TEAM_SUPERVISOR_API_KEY="sk-supervisor-revoked", **env,
        )  # fmt: skip
    (failure,) = {f["reason"] for f in json.loads(proc.stdout)["failures"]}
    assert "rejected the API key of the llama-3.1-8b-instant call" in failure and groq_url in failure
    assert failure.endswith("check GROQ_API_KEY"), failure
    reasons = [f["reason"] for f in json.loads(supervisor.stdout)["failures"]]
    assert any(r.endswith("check MCP_TEAM_SUPERVISOR_API_KEY") and MODEL in r for r in reasons), reasons


def test_a_bad_member_model_is_reported_with_its_key_path(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
        'model = "mistral:large"\n'
    )
    proc = cli_here("check", "--team", str(team))
    assert proc.returncode == 2 and "specialists[0].model" in proc.stderr and "mistral" in proc.stderr


# --- tool calls written as text ----------------------------------------------------------------


def _supervisor_tools() -> list[ToolDefinition]:
    from mcp_team.handoffs.supervisor import handoff_tool
    from mcp_team.handoffs.synthesis import FINALIZE_TOOL

    return [handoff_tool(DEFAULT_TEAM[0]), FINALIZE_TOOL]


SUPERVISOR_TOOLS = _supervisor_tools()


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "handoff_to_researcher", "arguments": {"task": "Find facts"}}',
        '```json\n{"name": "handoff_to_researcher", "arguments": {"task": "Find facts"}}\n```',
        '<tool_call>\n{"name": "finalize", "arguments": {"answer": "x"}}\n</tool_call>',
        '[{"type": "function", "function": {"name": "handoff_to_researcher", "arguments": "{}"}}]',
        '```\n{"name": "handoff_to_researcher", "arguments": {"task": "unterminated}\n```',
    ],
    ids=["bare", "fenced", "tagged", "list", "broken-json"],
)
def test_a_tool_call_written_as_text_is_recognised(text: str) -> None:
    assert read_calls(text, SUPERVISOR_TOOLS).names


@pytest.mark.parametrize(
    "text",
    [
        "Bees pollinate flowers.",
        '```json\n{"name": "Ada", "born": 1815}\n```',  # an answer that happens to hold JSON
        '{"name": "handoff_to_ghost"}',  # names no tool offered, and has no call's shape (no arguments)
    ],
)
def test_an_answer_is_not_a_tool_call(text: str) -> None:
    assert not read_calls(text, SUPERVISOR_TOOLS).calls


@pytest.mark.anyio
async def test_a_supervisor_turn_written_as_json_text_is_run_on_a_server_of_ones_own(gpt: FakeOpenAIAPI) -> None:
    """As Qwen2.5 1.5B on llama.cpp's server does: the call as fenced JSON in the reply's text. A server other than
    OpenAI's own API reads such calls by default (tool_calls = auto): the handoff runs, recorded as a text call."""
    call = {"name": "handoff_to_researcher", "arguments": {"task": "Research the transistor"}}
    gpt.reply(200, completion(f"I will ask the researcher.\n```json\n{json.dumps(call)}\n```", model=MODEL))
    result = await Team(ModelSet.single(on(gpt))).run(REQUEST)
    assert result.status == "complete" and not result.failures, result.failures
    first = result.handoffs[0]
    assert (first.target, first.task, first.text_call) == ("researcher", "Research the transistor", True)
    assert not any(h.text_call for h in result.handoffs[1:])  # the rest came as native calls
    assert "handoff_to_researcher" not in result.answer
    # The run went on as if the call had been native: the next request answers the call with its result.
    sent = gpt.requests[2]["messages"]
    assert any(m["role"] == "tool" for m in sent) and any(m.get("tool_calls") for m in sent), sent


@pytest.mark.anyio
async def test_a_supervisor_turn_written_as_json_text_goes_back_when_text_calls_are_off(gpt: FakeOpenAIAPI) -> None:
    """tool_calls = native: such a reply goes back to the model, and is never the answer."""
    call = {"name": "handoff_to_researcher", "arguments": {"task": "Research the transistor"}}
    gpt.reply(200, completion(f"```json\n{json.dumps(call)}\n```", model=MODEL))
    result = await Team(ModelSet.single(ToolCallsModel(on(gpt), "native"))).run(REQUEST)
    assert result.status == "complete" and result.handoffs
    assert not any(h.text_call for h in result.handoffs)
    assert "handoff_to_researcher" not in result.answer
    assert [(f.kind, f.recovered) for f in result.failures] == [("malformed_tool_call", True)]
    feedback = gpt.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and "wrote a tool call as text" in feedback["content"]


# --- sampling settings ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_supervisor_call_written_as_text_after_its_thinking_goes_back_and_is_never_the_answer(
    gpt: FakeOpenAIAPI,
) -> None:
    """As a reasoning model (Qwen3, DeepSeek-R1 distills) on a server that leaves its thinking in the content."""
    call = {"name": "handoff_to_researcher", "arguments": {"task": "Research the transistor"}}
    gpt.reply(200, completion(f"<think>\nI should hand this off.\n</think>\n\n{json.dumps(call)}", model=MODEL))
    result = await Team(ModelSet.single(ToolCallsModel(on(gpt), "native"))).run(REQUEST)
    assert result.status == "complete" and result.handoffs
    assert "handoff_to_researcher" not in result.answer and "<think>" not in result.answer
    assert [(f.kind, f.recovered) for f in result.failures] == [("malformed_tool_call", True)]


def test_sampling_settings_per_role_and_member_are_sent(gpt: FakeOpenAIAPI, tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        "[models]\nspecialist_sampling = { temperature = 0.7 }\n\n"
        '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
        "sampling = { temperature = 0.1, max_tokens = 333 }\n\n"
        '[[specialists]]\nname = "writer"\ndescription = "Writes reports."\nprompt = "Write."\n'
    )
    env = {"OPENAI_BASE_URL": gpt.base_url}
    proc = cli_here(
        "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{MODEL}",
        "Research bees and write a report", **env,
    )  # fmt: skip
    assert json.loads(proc.stdout)["status"] == "complete", proc.stderr
    sent = {}
    for body in gpt.requests:
        system = body["messages"][0]["content"]
        who = (
            "researcher" if system.endswith("Find facts.") else "writer" if system.endswith("Write.") else "supervisor"
        )
        sent.setdefault(who, set()).add((body.get("temperature"), body.get("max_tokens")))
    assert sent["researcher"] == {(0.1, 333)}  # its own settings, over its role's
    assert sent["writer"] == {(0.7, 4096)}  # its role's temperature, the engine's output limit
    assert all(temperature is None for temperature, _ in sent["supervisor"])  # nothing set: the model's default


# --- run_team's max_cost ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_run_team_max_cost_is_capped_by_the_team_file(tmp_path: Path) -> None:
    from mcp import Client

    team = tmp_path / "team.toml"
    assert cli_here("init", str(team)).returncode == 0
    team.write_text(team.read_text().replace("[supervisor.budgets]", "[supervisor.budgets]\nmax_cost = 0.5", 1))
    # The server `serve --team` builds, with an MCP client on it in memory: the cap is the tool's, not stdio's.
    server = build_server(ModelSettings(model="offline"), load_team(str(team)))
    async with Client(server, mode="legacy") as client:
        above = await client.call_tool("run_team", {"request": "Research bees", "max_cost": 1})
        below = await client.call_tool("run_team", {"request": "Research bees", "max_cost": 0.25})
    text = " ".join(getattr(c, "text", "") for c in above.content)
    assert above.is_error and "max_cost=1" in text and "0.5" in text
    assert not below.is_error and below.structured_content["status"] == "complete"


# --- fallback specialists -----------------------------------------------------------------------

FALLBACK_TEAM = """
[supervisor]
breaker_threshold = 1

[[specialists]]
name = "researcher"
description = "Finds facts."
prompt = "Find facts."
fallback = "scout"

[[specialists]]
name = "scout"
description = "Finds facts another way."
prompt = "Find facts another way."

[[specialists]]
name = "writer"
description = "Writes reports."
prompt = "Write."
"""


def test_a_fallback_specialist_takes_over_when_the_circuit_opens(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(FALLBACK_TEAM)
    proc = cli_here(
        "run",
        "--json",
        "--ephemeral",
        "--model",
        "offline",
        "--team",
        str(team),
        "--fault",
        "server_error:researcher",
        "Research bees",
    )
    result = json.loads(proc.stdout)
    first, retry = result["handoffs"][:2]
    assert (first["target"], first["status"], first["fallback"]) == ("researcher", "failed", None)
    assert (retry["target"], retry["status"], retry["retry_of"]) == ("scout", "completed", first["id"])
    assert retry["fallback"] == "specialist scout took it: the circuit of researcher is open"
    assert result["status"] == "complete", result["failures"]


def test_a_fallback_specialist_must_be_another_member(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(FALLBACK_TEAM.replace('fallback = "scout"', 'fallback = "ghost"'))
    proc = cli_here("check", "--team", str(team))
    assert proc.returncode == 2 and "specialists[0].fallback: 'ghost' must be another specialist" in proc.stderr


def test_the_openai_sdk_and_the_price_table_stay_off_the_start_up_path(tmp_path: Path) -> None:
    """Serving a team whose members are on OpenAI-compatible models imports neither until a model is called."""
    team = tmp_path / "team.toml"
    team.write_text(
        '[models]\nsupervisor = "openai:gpt-4o"\nsupervisor_fallback = "openai:gpt-4o-mini"\n\n'
        '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'
        'model = "openai:qwen2.5:7b"\nbase_url = "http://127.0.0.1:1/v1"\nsampling = { temperature = 0.2 }\n'
    )
    code = (
        "import sys; from mcp_team.server.app import build_server; from mcp_team.teamfile.loading import load_team; "
        f"build_server(team=load_team({str(team)!r})); print(sorted({{'openai', 'genai_prices'}} & set(sys.modules)))"
    )
    proc = subprocess.run(
        [str(Path(MCP_TEAM).parent / "python"), "-c", code],
        capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(OPENAI_API_KEY="sk-test"),
    )  # fmt: skip
    assert proc.stdout.strip() == "[]", proc.stderr
