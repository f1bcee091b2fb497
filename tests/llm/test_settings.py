"""Model settings from the environment: which backend is chosen, what `build_models` builds, secrets kept out."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from mcp_team.errors import ConfigError
from mcp_team.llm.building import build_models
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.faults import FAULT_KINDS, Fault, FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.settings import ModelSettings
from support import SCRUBBED_PREFIXES

KEY = "sk-ant-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No MCP_TEAM_*, ANTHROPIC_* (or other model or tracing) variable from the machine running the tests
    leaks in."""
    for name in list(os.environ):
        if name.upper().startswith(SCRUBBED_PREFIXES):
            monkeypatch.delenv(name)
    return monkeypatch


# --- choosing the backend ---------------------------------------------------------------------------------------


def test_nothing_configured_is_a_config_error_listing_the_options() -> None:
    with pytest.raises(ConfigError) as caught:
        ModelSettings().backend()
    message = str(caught.value)
    assert "no model is configured" in message
    for option in (
        "anthropic",
        "openai",
        "offline",
        "sampling",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "MCP_TEAM_MODEL=offline",
        "ANTHROPIC_API_KEY wins",
    ):
        assert option in message


def test_api_key_selects_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert ModelSettings().backend() == "anthropic"


def test_prefixed_api_key_selects_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_ANTHROPIC_API_KEY", KEY)
    settings = ModelSettings()
    assert settings.backend() == "anthropic"
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == KEY


def test_supervisor_key_selects_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_API_KEY", KEY)
    assert ModelSettings().backend() == "anthropic"


@pytest.mark.parametrize("backend", ["offline", "sampling", "anthropic"])
def test_explicit_model_from_env_wins_over_the_key(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MCP_TEAM_MODEL", backend)
    assert ModelSettings().backend() == backend


def test_explicit_model_argument_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MCP_TEAM_MODEL", "anthropic")
    assert ModelSettings(model="offline").backend() == "offline"


def test_explicit_anthropic_without_a_key_selects_anthropic_but_cannot_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "anthropic")
    settings = ModelSettings()
    assert settings.backend() == "anthropic"
    with pytest.raises(ConfigError, match="needs an API key: set ANTHROPIC_API_KEY"):
        build_models(settings)


def test_a_model_without_a_provider_is_rejected_naming_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "gpt")
    with pytest.raises(ValidationError) as caught:
        ModelSettings()
    assert "'gpt' names no provider; write anthropic, openai, offline or sampling" in str(caught.value)
    assert "openai:gpt" in str(caught.value)


def test_empty_api_key_counts_as_not_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with pytest.raises(ConfigError, match="no model is configured"):
        ModelSettings().backend()


# --- building the offline backend -------------------------------------------------------------------------------


def test_build_offline_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "offline")
    models = build_models(ModelSettings())
    model = models.for_role(SUPERVISOR)
    assert isinstance(model, OfflineModel)
    assert models.for_role(SPECIALIST) is model
    assert (model.latency, models.provider) == (0.0, "offline")


def test_build_offline_with_latency_faults_and_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "offline")
    monkeypatch.setenv("MCP_TEAM_OFFLINE_LATENCY_MS", "250")
    monkeypatch.setenv("MCP_TEAM_OFFLINE_FAULTS", "rate_limit:researcher:1, revise")  # the old name still works
    monkeypatch.setenv("MCP_TEAM_MAX_CONCURRENCY", "3")
    models = build_models(ModelSettings())
    model = models.for_role(SPECIALIST)
    assert isinstance(model, FaultyModel) and isinstance(model.wrapped, OfflineModel)
    assert model.wrapped.latency == pytest.approx(0.25)
    assert model.faults == [Fault("rate_limit", "researcher", 1), Fault("revise", "*", None)]
    assert models.max_concurrency == 3
    assert models.limiter_for(model).calls.total_tokens == 3


def test_a_bad_fault_spec_is_a_config_error_naming_the_variable_and_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "offline")
    monkeypatch.setenv("MCP_TEAM_FAULTS", "rate_limit,explode")
    with pytest.raises(ConfigError) as caught:
        build_models(ModelSettings())
    message = str(caught.value)
    assert message.startswith("--fault / MCP_TEAM_FAULTS: bad fault 'explode'")
    assert all(kind in message for kind in FAULT_KINDS)


def test_negative_latency_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_OFFLINE_LATENCY_MS", "-5")
    with pytest.raises(ValidationError, match="offline_latency_ms"):
        ModelSettings()


# --- building the anthropic backend -----------------------------------------------------------------------------


def test_build_anthropic_per_role(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_team.llm.anthropic import AnthropicModel

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "claude-big")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "claude-small")
    monkeypatch.setenv("MCP_TEAM_MAX_RETRIES", "1")
    models = build_models(ModelSettings())

    supervisor, worker = models.for_role(SUPERVISOR), models.for_role(SPECIALIST)
    assert isinstance(supervisor, AnthropicModel) and isinstance(worker, AnthropicModel)
    assert supervisor is not worker
    assert (supervisor.name, worker.name) == ("claude-big", "claude-small")
    assert supervisor._base_url == worker._base_url == "http://127.0.0.1:9/v1"
    assert supervisor._api_key == worker._api_key == KEY
    assert supervisor.max_retries == worker.max_retries == 1
    assert models.provider == "anthropic"
    assert supervisor._client is None  # nothing is connected until the first call


def test_build_anthropic_default_model_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    models = build_models(ModelSettings())
    assert (models.for_role(SUPERVISOR).name, models.for_role(SPECIALIST).name) == (
        "claude-sonnet-5-5",
        "claude-haiku-5-5",
    )
    assert models.for_role(SUPERVISOR)._base_url is None


def test_per_role_keys_and_base_urls_override_the_shared_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://shared.invalid")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_API_KEY", "sk-specialist-only")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_BASE_URL", "http://specialist.invalid")
    models = build_models(ModelSettings())
    supervisor, worker = models.for_role(SUPERVISOR), models.for_role(SPECIALIST)
    assert (supervisor._api_key, supervisor._base_url) == (KEY, "http://shared.invalid")
    assert (worker._api_key, worker._base_url) == ("sk-specialist-only", "http://specialist.invalid")


def test_supervisor_key_alone_cannot_build_the_specialist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_API_KEY", KEY)
    with pytest.raises(ConfigError, match="MCP_TEAM_SPECIALIST_API_KEY"):
        build_models(ModelSettings())


def test_sampling_cannot_be_built_outside_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_MODEL", "sampling")
    with pytest.raises(ConfigError) as caught:
        build_models(ModelSettings())
    assert "mcp-team serve" in str(caught.value)
    assert "--model anthropic, --model openai[:MODEL] or --model offline" in str(caught.value)


# --- secrets ----------------------------------------------------------------------------------------------------


def test_api_keys_never_appear_in_repr_or_str(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_API_KEY", "sk-supervisor-SECRET")
    settings = ModelSettings()
    shown = [repr(settings), str(settings), settings.model_dump_json(), repr(settings.model_dump())]
    for text in shown:
        assert KEY not in text
        assert "sk-supervisor-SECRET" not in text
    assert "anthropic_api_key" in repr(settings)  # the field is listed, masked
    models = build_models(settings)
    assert KEY not in repr(models.for_role(SPECIALIST))
    assert "sk-supervisor-SECRET" not in repr(models.for_role(SUPERVISOR))


# --- parse_faults -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "faults"),
    [
        ("", []),
        (" , ,,", []),
        ("timeout", [Fault("timeout", "*", None)]),
        ("rate_limit:researcher", [Fault("rate_limit", "researcher", None)]),
        ("rate_limit:researcher:2", [Fault("rate_limit", "researcher", 2)]),
        ("server_error::3", [Fault("server_error", "*", 3)]),
        ("overloaded:writer:", [Fault("overloaded", "writer", None)]),
        ("revise:reviewer:0", [Fault("revise", "reviewer", 0)]),
        (
            " rate_limit:researcher:1 , endless_tools:analyst ,repeat_handoff",
            [Fault("rate_limit", "researcher", 1), Fault("endless_tools", "analyst"), Fault("repeat_handoff")],
        ),
    ],
)
def test_parse_faults(spec: str, faults: list[Fault]) -> None:
    assert parse_faults(spec) == faults


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("explode", "bad fault 'explode': expected KIND[:AGENT[:TIMES]] with KIND one of rate_limit,"),
        ("RATE_LIMIT", "bad fault 'RATE_LIMIT'"),
        (":researcher", "bad fault ':researcher'"),
        ("rate_limit:a:1:2", "bad fault 'rate_limit:a:1:2': expected KIND[:AGENT[:TIMES]]"),
        ("rate_limit:a:two", "TIMES must be a whole number, got 'two'"),
        ("rate_limit:a:-1", "TIMES must be a whole number, got '-1'"),
        ("timeout,rate_limit:a:1.5", "TIMES must be a whole number, got '1.5'"),
    ],
)
def test_parse_faults_rejects(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_faults(spec)
    assert message in str(caught.value)


def test_fault_fires_for_its_agent_the_given_number_of_times() -> None:
    once = Fault("rate_limit", "researcher", 1)
    assert not once.take("writer")
    assert once.take("researcher")
    assert not once.take("researcher")

    always = Fault("timeout")
    assert all(always.take(agent) for agent in ("a", "b", "a"))
    assert not Fault("revise", "*", 0).take("reviewer")
