"""Model strings (`provider:model`), which provider each role and specialist gets, and what is built."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from mcp_team.errors import ConfigError
from mcp_team.llm.anthropic import AnthropicModel
from mcp_team.llm.building import build_models
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.openai import OpenAIModel
from mcp_team.llm.settings import MemberModel, ModelRef, ModelSettings, parse_model

ANTHROPIC_KEY = "sk-ant-test-SECRET-1"
OPENAI_KEY = "sk-proj-test-SECRET-2"
OLLAMA = "http://127.0.0.1:11434/v1"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("MCP_TEAM_", "ANTHROPIC_", "OPENAI_", "SCOUT_")):
            monkeypatch.delenv(name)


def roles(settings: ModelSettings) -> tuple[object, object]:
    models = build_models(settings)
    return models.for_role(SUPERVISOR), models.for_role(SPECIALIST)


# -- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("anthropic:claude-sonnet-5-5", ModelRef("anthropic", "claude-sonnet-5-5")),
        ("openai:gpt-4o-mini", ModelRef("openai", "gpt-4o-mini")),
        ("openai:qwen2.5:7b", ModelRef("openai", "qwen2.5:7b")),  # split at the first ':' only
        ("OpenAI: gpt-4o ", ModelRef("openai", "gpt-4o")),
        ("openai:", ModelRef("openai", None)),
        ("openai", ModelRef("openai", None)),
        ("offline", ModelRef("offline", None)),
        ("sampling", ModelRef("sampling", None)),
        ("claude-haiku-5-5", ModelRef(None, "claude-haiku-5-5")),  # a plain name: the default provider's
        ("openai/gpt-4o", ModelRef(None, "openai/gpt-4o")),
    ],
)
def test_parse_model(text: str, ref: ModelRef) -> None:
    assert parse_model(text) == ref
    assert parse_model(str(ref)) == ref


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "cannot be empty"),
        ("qwen2.5:7b", "unknown provider 'qwen2.5' in the model 'qwen2.5:7b'"),
        ("qwen2.5:7b", "e.g. openai:qwen2.5:7b"),
        ("gemini:flash", "PROVIDER one of anthropic, openai, offline"),
        ("offline:fast", "offline has no model names"),
    ],
)
def test_parse_model_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_model(text)


def test_a_bad_role_model_from_the_environment_is_rejected_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "llama3.1:8b")
    with pytest.raises(ValidationError, match=r"unknown provider 'llama3.1'"):
        ModelSettings()


def test_a_bad_role_model_from_a_team_file_is_a_config_error() -> None:
    # Team files update the settings without validation: the error comes when the models are built.
    settings = ModelSettings(model="openai", openai_api_key=OPENAI_KEY).model_copy(
        update={"supervisor_model": "qwen2.5:7b"}
    )
    with pytest.raises(ConfigError, match=r"the supervisor model: unknown provider 'qwen2.5'"):
        build_models(settings)


# -- choosing the provider -------------------------------------------------------------------------


def test_openai_key_selects_openai_with_its_default_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, OpenAIModel) and isinstance(worker, OpenAIModel)
    assert (supervisor.name, worker.name) == ("gpt-4o", "gpt-4o-mini")
    assert supervisor.base_url is None and supervisor._api_key == OPENAI_KEY


def test_with_both_keys_anthropic_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    assert ModelSettings().backend() == "anthropic"
    assert all(isinstance(m, AnthropicModel) for m in roles(ModelSettings()))


def test_a_provider_prefix_alone_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "openai:gpt-4.1")
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, OpenAIModel) and supervisor.name == "gpt-4.1"
    assert isinstance(worker, OpenAIModel) and worker.name == "gpt-4o-mini"  # openai's default specialist


def test_with_both_keys_a_role_without_a_provider_gets_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "openai:gpt-4.1")
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, OpenAIModel) and supervisor.name == "gpt-4.1"
    assert isinstance(worker, AnthropicModel) and worker.name == "claude-haiku-5-5"


def test_a_provider_named_by_the_other_role_is_the_last_resort(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "openai:qwen2.5:7b")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_BASE_URL", OLLAMA)
    assert ModelSettings().backend() == "openai"
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "offline")  # one role offline says nothing about the other
    assert ModelSettings().configured_backend() is None


def test_a_local_server_needs_only_its_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", OLLAMA)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "openai:qwen2.5:7b")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "llama3.2")  # a plain name: the default provider's
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, OpenAIModel) and isinstance(worker, OpenAIModel)
    assert (supervisor.name, worker.name) == ("qwen2.5:7b", "llama3.2")
    assert supervisor.base_url == worker.base_url == OLLAMA
    assert supervisor._api_key is None  # none needed


def test_model_flag_with_a_name_is_every_role_s_model_unless_a_role_names_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    supervisor, worker = roles(ModelSettings(model="openai:gpt-4.1-mini"))
    assert (supervisor.name, worker.name) == ("gpt-4.1-mini", "gpt-4.1-mini")  # type: ignore[attr-defined]

    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "anthropic:claude-opus-4-1")
    supervisor, worker = roles(ModelSettings(model="openai:gpt-4.1-mini"))
    assert isinstance(supervisor, AnthropicModel) and supervisor.name == "claude-opus-4-1"
    assert isinstance(worker, OpenAIModel) and worker.name == "gpt-4.1-mini"


def test_providers_mix_per_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "anthropic:claude-sonnet-5-5")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "openai:gpt-4o-mini")
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, AnthropicModel) and supervisor._api_key == ANTHROPIC_KEY
    assert isinstance(worker, OpenAIModel) and worker._api_key == OPENAI_KEY


def test_one_role_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "offline")
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, AnthropicModel) and isinstance(worker, OfflineModel)


def test_both_roles_offline_need_no_default_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    # each role names its provider: the team runs, where it said "no model is configured"
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "offline")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "offline")
    supervisor, worker = roles(ModelSettings())
    assert isinstance(supervisor, OfflineModel) and isinstance(worker, OfflineModel)


def test_model_offline_runs_the_whole_team_offline_whatever_the_roles_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_MODEL", "openai:gpt-4o")
    models = build_models(ModelSettings(model="offline"), {"scout": MemberModel(model="anthropic:claude-x")})
    assert isinstance(models.for_role(SUPERVISOR), OfflineModel)
    assert models.for_member("scout", SPECIALIST) is models.for_role(SPECIALIST)


def test_openai_without_a_key_or_a_base_url_cannot_build(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="the openai backend needs an API key: set OPENAI_API_KEY"):
        build_models(ModelSettings(model="openai"))


def test_a_role_cannot_be_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "sampling")
    with pytest.raises(ConfigError, match="the specialist model cannot be sampling"):
        build_models(ModelSettings(model="anthropic"))


def test_per_role_key_and_base_url_apply_to_the_role_s_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_BASE_URL", OLLAMA)
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "openai:qwen2.5:7b")
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_API_KEY", "local-key")
    supervisor, worker = roles(ModelSettings())
    assert (supervisor.base_url, supervisor._api_key) == (None, OPENAI_KEY)  # type: ignore[attr-defined]
    assert (worker.base_url, worker._api_key) == (OLLAMA, "local-key")  # type: ignore[attr-defined]


def test_secrets_lists_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("MCP_TEAM_SUPERVISOR_API_KEY", "sk-sup")
    settings = ModelSettings()
    assert sorted(settings.secrets()) == sorted([ANTHROPIC_KEY, OPENAI_KEY, "sk-sup"])
    assert OPENAI_KEY not in repr(settings) and OPENAI_KEY not in settings.model_dump_json()


# -- specialists with their own model --------------------------------------------------------------


def test_a_specialist_can_have_its_own_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("SCOUT_KEY", "sk-scout")
    models = build_models(
        ModelSettings(),
        {
            "scout": MemberModel(model="openai:qwen2.5:7b", base_url=OLLAMA, api_key_env="SCOUT_KEY"),
            "coder": MemberModel(model="openai:gpt-4.1"),
            "writer": MemberModel(model="claude-haiku-5-5"),  # a plain name: the default provider's
        },
        environ=os.environ,
    )
    scout, coder = models.for_member("scout", SPECIALIST), models.for_member("coder", SPECIALIST)
    assert isinstance(scout, OpenAIModel) and (scout.name, scout.base_url, scout._api_key) == (
        "qwen2.5:7b",
        OLLAMA,
        "sk-scout",
    )
    assert isinstance(coder, OpenAIModel) and (coder.name, coder.base_url) == ("gpt-4.1", None)
    # The same model as the role's is the same instance; a specialist without its own uses its role's.
    assert models.for_member("writer", SPECIALIST) is models.for_role(SPECIALIST)
    assert models.for_member("analyst", SPECIALIST) is models.for_role(SPECIALIST)
    assert models.for_member("analyst", SUPERVISOR) is models.for_role(SUPERVISOR)


def test_a_specialist_s_key_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    with pytest.raises(ConfigError, match="specialist 'scout': its API key variable SCOUT_KEY is not set"):
        build_models(
            ModelSettings(), {"scout": MemberModel(model="openai:gpt-4o", api_key_env="SCOUT_KEY")}, environ=os.environ
        )


def test_a_specialist_s_key_variable_needs_an_environment_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library caller that gives no environment is told so, not that its variable is unset (it may be)."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("SCOUT_KEY", "sk-scout")
    scout = {"scout": MemberModel(model="openai:gpt-4o", api_key_env="SCOUT_KEY")}
    with pytest.raises(ConfigError, match=r"SCOUT_KEY cannot be read: no environment was given \(build_models"):
        build_models(ModelSettings(), scout)
    models = build_models(ModelSettings(), scout, environ={"SCOUT_KEY": "sk-given"})
    assert models.for_member("scout", SPECIALIST)._api_key == "sk-given"  # type: ignore[attr-defined]


def test_a_specialist_s_model_string_is_validated() -> None:
    with pytest.raises(ValidationError, match=r"unknown provider 'qwen2.5'"):
        MemberModel(model="qwen2.5:7b")


# -- limits and prices per endpoint ----------------------------------------------------------------


def test_limits_per_endpoint_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("MCP_TEAM_SPECIALIST_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("MCP_TEAM_MAX_CONCURRENCY", "5")
    monkeypatch.setenv("MCP_TEAM_REQUESTS_PER_MINUTE", "50")
    monkeypatch.setenv("MCP_TEAM_ENDPOINT_LIMITS", '{"openai": {"max_concurrency": 20, "tokens_per_minute": 200000}}')
    models = build_models(ModelSettings())
    supervisor, worker = models.for_role(SUPERVISOR), models.for_role(SPECIALIST)
    assert models.limiter_for(supervisor).limits.model_dump() == {
        "max_concurrency": 5,
        "requests_per_minute": 50,
        "tokens_per_minute": None,
    }
    assert models.limiter_for(worker).limits.model_dump() == {
        "max_concurrency": 20,
        "requests_per_minute": None,
        "tokens_per_minute": 200000,
    }
    assert models.limiter_for(supervisor) is not models.limiter_for(worker)


def test_bad_endpoint_limits_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEAM_ENDPOINT_LIMITS", '{"openai": {"max_concurrency": 0}}')
    with pytest.raises(ValidationError, match=r"endpoint_limits.openai.max_concurrency"):
        ModelSettings()


def test_prices_name_the_price_list_of_a_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/v1")
    monkeypatch.setenv("MCP_TEAM_PRICES", '{"https://gateway.example/v1/": "openai"}')
    supervisor, _ = roles(ModelSettings())
    assert supervisor.price_provider == "openai"  # type: ignore[attr-defined]
