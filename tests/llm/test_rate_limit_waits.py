"""Rate limits never hang in silence (issue 35): a call that can never fit the tokens-per-minute limit fails at
once, naming the limit and the call's need (or has its output limit lowered to fit, saying so); a call that waits
for a rate says so as progress and in the run's notes. Through the limiter itself, the CLI and an MCP client, on
the OpenAI-compatible backend against the fake Chat Completions server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_team.llm.limits import EndpointLimiter, EndpointLimits, Limiters
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team_file
from support import cli_here
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

KEY = "sk-proj-test-SECRET-0123456789"
MODEL = "gpt-4o-mini"
ONE_MEMBER = '[[specialists]]\nname = "researcher"\ndescription = "Finds facts."\nprompt = "Find facts."\n'


@pytest.fixture
def api() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI(brain=offline_brain) as server:
        yield server


@pytest.fixture
def team(tmp_path: Path) -> Path:
    path = tmp_path / "team.toml"
    path.write_text(ONE_MEMBER)
    return path


# --- the limiter ---------------------------------------------------------------------------------------------------


def test_a_call_that_can_never_fit_the_token_rate_is_refused_at_once_naming_the_limit_and_its_need() -> None:
    limiter = Limiters(EndpointLimits(tokens_per_minute=300)).for_model(_Endpoint())
    with pytest.raises(Exception) as refused:
        limiter.output_within(prompt_tokens=1000, max_tokens=4096)
    message = str(refused.value)
    assert "the tokens-per-minute limit of openai (300: MCP_TEAM_TOKENS_PER_MINUTE)" in message
    assert "it needs about 1,256 tokens a minute (a prompt of about 1,000 tokens and at least 256 of output)" in message
    assert getattr(refused.value, "kind", None) == "unavailable"  # not retried, no fallback: waiting cannot help


def test_a_call_over_the_token_rate_has_its_output_limit_lowered_to_fit_saying_so() -> None:
    overrides = {"openai": EndpointLimits(tokens_per_minute=3000)}
    limiter = Limiters(overrides=overrides).for_model(_Endpoint())
    fits, note = limiter.output_within(prompt_tokens=1000, max_tokens=4096)
    assert fits == 2000
    assert note is not None and "lowered from 4,096 to as little as 2,000 tokens" in note
    assert (
        "the tokens-per-minute limit of openai (3,000: tokens_per_minute of 'openai' in MCP_TEAM_ENDPOINT_LIMITS)"
        in note
    )
    assert limiter.output_within(prompt_tokens=1000, max_tokens=1500) == (1500, None)  # it fits: as it is


async def test_a_wait_for_the_token_rate_is_told_first_with_how_long() -> None:
    limiter = EndpointLimiter(EndpointLimits(tokens_per_minute=600), name="openai")  # 10 tokens a second
    told: list[tuple[str, float]] = []

    async def on_wait(limit: str, seconds: float) -> None:
        told.append((limit, seconds))

    async with limiter.slot(580, on_wait):
        pass
    assert told == []  # within the minute's allowance: no wait
    with anyio.fail_after(30):
        async with limiter.slot(40, on_wait):  # 20 tokens short: about 2 s
            pass
    ((limit, seconds),) = told
    assert limit == "the tokens-per-minute limit of openai (600: MCP_TEAM_TOKENS_PER_MINUTE)"
    assert 1.0 <= seconds <= 2.1


class _Endpoint:
    name, provider, base_url = MODEL, "openai", None


# --- through the CLI and an MCP client -------------------------------------------------------------------------


def env_for(api: FakeOpenAIAPI, **more: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": api.base_url, "OPENAI_API_KEY": KEY, **more}


def test_the_cli_fails_at_once_when_the_token_rate_is_below_one_calls_need(api: FakeOpenAIAPI, team: Path) -> None:
    proc = cli_here(
        "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{MODEL}", "Research bees",
        **env_for(api, MCP_TEAM_TOKENS_PER_MINUTE="300"),
    )  # fmt: skip
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and proc.returncode != 0
    reason = " ".join(f["reason"] for f in result["failures"])
    assert f"can never go through the tokens-per-minute limit of openai at {api.base_url}" in reason, reason
    assert "(300: MCP_TEAM_TOKENS_PER_MINUTE)" in reason and re.search(r"needs about [\d,]+ tokens a minute", reason)
    assert result["usage"]["model_calls"] == 0 and api.requests == []  # nothing was sent


async def test_run_team_fails_at_once_when_the_token_rate_is_below_one_calls_need(
    api: FakeOpenAIAPI, team: Path
) -> None:
    settings = ModelSettings(
        model=f"openai:{MODEL}",
        openai_base_url=api.base_url,
        openai_api_key=KEY,
        tokens_per_minute=300,  # type: ignore[arg-type]
    )
    async with Client(build_server(settings, load_team_file(team))) as client:
        result = await client.call_tool("run_team", {"request": "Research bees"})
    assert result.is_error
    text = result.content[0].text
    assert "could not answer" in text and "can never go through the tokens-per-minute limit of openai" in text
    assert "(300: MCP_TEAM_TOKENS_PER_MINUTE)" in text


def test_the_cli_says_when_a_call_waits_for_the_request_rate(api: FakeOpenAIAPI, team: Path) -> None:
    # 2.85 requests a minute: two calls at once, the third waits about 3 s (less the time the first two took).
    proc = cli_here(
        "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{MODEL}", "Research bees",
        **env_for(api, MCP_TEAM_REQUESTS_PER_MINUTE="2.85"),
    )  # fmt: skip
    result = json.loads(proc.stdout)
    assert result["status"] == "complete", result["failures"]
    waited = re.search(r"· waiting (\d+) s for the requests-per-minute limit of openai at \S+ \(2\.85: ", proc.stderr)
    assert waited and int(waited[1]) >= 1, proc.stderr
    (note,) = [n for n in result["notes"] if "waited" in n]
    assert note.startswith("Model calls waited 1 time for the requests-per-minute limit of openai at ")
    assert "MCP_TEAM_REQUESTS_PER_MINUTE" in note and "Raise the limit" in note


async def test_run_team_reports_a_wait_for_the_request_rate_as_progress_and_in_its_notes(
    api: FakeOpenAIAPI, team: Path
) -> None:
    settings = ModelSettings(
        model=f"openai:{MODEL}",
        openai_base_url=api.base_url,
        openai_api_key=KEY,
        requests_per_minute=2.85,  # type: ignore[arg-type]
    )
    said: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append(message or "")

    async with Client(build_server(settings, load_team_file(team))) as client:
        result = await client.call_tool("run_team", {"request": "Research bees"}, progress_callback=on_progress)
    run = result.structured_content
    assert run is not None and run["status"] == "complete"
    assert any(m.startswith("waiting ") and "for the requests-per-minute limit of openai" in m for m in said), said
    assert any("Model calls waited 1 time for the requests-per-minute limit" in n for n in run["notes"])
