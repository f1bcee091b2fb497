"""Model settings from the environment (and CLI flags) and model strings; the `ModelSet` they describe is built
in `llm.building`.

A model string is `provider:model` (`anthropic:claude-sonnet-5-5`, `openai:gpt-4o-mini`,
`openai:qwen2.5:7b`: split at the first `:` only), a provider alone (`openai`, `offline`; its
default models), or a plain model name, which means a model of the default provider, as before.

A role whose model string names a provider runs on it. Every other role runs on the default provider:
1. `--model` / `MCP_TEAM_MODEL` (`offline`, `sampling` and `replay:FILE` there run the whole team on them);
2. else `ANTHROPIC_API_KEY` being set: anthropic (it wins when several keys are set);
3. else `OPENAI_API_KEY` or `OPENAI_BASE_URL` being set: openai;
4. else the provider the other role's model string names (offline aside);
5. else a per-role key alone: anthropic; else a `ConfigError` that lists the options.
So `MCP_TEAM_SUPERVISOR_MODEL=openai:gpt-4o` with `OPENAI_API_KEY` set needs nothing else. The
offline backend is used only when asked for by name.

The environment is read where `ModelSettings()` is constructed (pydantic-settings reads it then): by the CLI
and the server, once, at the edge. Nothing else here reads it: the functions that need a variable by name (a
specialist's `api_key_env`, the name a user set a field with) take the environment as a mapping. A library
caller builds `ModelSettings(...)` with the values it wants (or `ModelSettings()` to read its environment, as
the CLI does) and passes `environ=os.environ` to `build_models` (llm/building.py) only if a member names its
key variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_team.errors import ConfigError
from mcp_team.llm.call import SPECIALIST, SUPERVISOR
from mcp_team.llm.limits import EndpointLimits
from mcp_team.llm.text_calls import ToolCallMode
from mcp_team.llm.wrappers import SamplingSettings

Backend = Literal["anthropic", "openai", "offline", "sampling", "replay"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)

DEFAULT_MODELS: dict[str, dict[str, str]] = {
    "anthropic": {SUPERVISOR: "claude-sonnet-5-5", SPECIALIST: "claude-haiku-5-5"},
    "openai": {SUPERVISOR: "gpt-4o", SPECIALIST: "gpt-4o-mini"},
    "offline": {SUPERVISOR: "offline", SPECIALIST: "offline"},
}


@dataclass(frozen=True)
class ModelRef:
    """A parsed model string; `provider` None means the default provider, `name` None its default model."""

    provider: Backend | None
    name: str | None

    def __str__(self) -> str:
        if self.provider is None:
            return self.name or ""
        return f"{self.provider}:{self.name}" if self.name else self.provider


def parse_model(text: str) -> ModelRef:
    """Parse a model string (see the module docstring). Raises `ValueError` saying what is wrong."""
    text = text.strip()
    if not text:
        raise ValueError("a model string cannot be empty; write PROVIDER:MODEL, e.g. openai:gpt-4o-mini")
    head, colon, tail = text.partition(":")
    if not colon:
        if text == "replay":
            raise ValueError("replay needs its recording: write replay:FILE (make one with mcp-team run --record FILE)")
        return ModelRef(cast(Backend, text), None) if text in BACKENDS else ModelRef(None, text)
    provider = head.strip().lower()
    if provider not in BACKENDS:
        raise ValueError(
            f"unknown provider {head!r} in the model {text!r}; write PROVIDER:MODEL with PROVIDER one of "
            f"anthropic, openai, offline, replay (a model name containing ':' needs its provider first, e.g. "
            f"openai:{text})"
        )
    name = tail.strip() or None
    if provider == "replay" and not name:
        raise ValueError("replay needs its recording: write replay:FILE (make one with mcp-team run --record FILE)")
    if provider in ("offline", "sampling") and name:
        raise ValueError(f"{provider} has no model names; write {provider!r}, not {text!r}")
    return ModelRef(cast(Backend, provider), name)


def check_base_url(value: str | None) -> str | None:
    """A base URL as the SDKs need it: `http://` or `https://` and a host. Checked where it is set: without a
    scheme every call fails as a connection error, retried, deep in a run."""
    if value is not None:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
            raise ValueError(
                f"{value!r} is not a base URL; write it with http:// or https://, e.g. http://{rest or value}"
            )
    return value


class MemberModel(BaseModel):
    """A specialist's own model (team file): a model string, and its endpoint when it is not its provider's."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    model: str | None = Field(default=None, description="Its model string; None: its role's model.")
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="The environment variable that holds its API key.")
    fallback: str | None = Field(
        default=None, description="The model string used when its model keeps failing (overloaded, timeouts)."
    )
    sampling: SamplingSettings | None = None
    tool_calls: ToolCallMode | None = Field(
        default=None,
        description="Whether calls its model writes as text are run (auto, native, text); None: its role's.",
    )
    role: str = Field(default=SPECIALIST, description="Its role, whose model it uses unless it names its own.")

    @field_validator("model", "fallback")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_model(value)
        return value

    _base_url = field_validator("base_url")(check_base_url)


def env_variables(settings: type[BaseSettings], field: str) -> list[str]:
    """The environment variables that set `field` of `settings`, in the order they are read (two for a field
    with alias choices: MCP_TEAM_OPENAI_BASE_URL and OPENAI_BASE_URL)."""
    alias = settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    if isinstance(alias, str):  # one variable of its own name (MCP_TEAM_FILE for team_file)
        return [alias]
    return [f"{settings.model_config.get('env_prefix') or ''}{field}".upper()]


def env_variable(settings: type[BaseSettings], field: str, environ: Mapping[str, str]) -> str:
    """Of `env_variables`, the one set in `environ` (any case, as pydantic-settings reads them), else the
    first: the name to give a user who set the field, not one they never wrote."""
    names = env_variables(settings, field)
    present = {name.upper() for name, value in environ.items() if value}
    return next((name for name in names if name.upper() in present), names[0])


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MCP_TEAM_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    model: str | None = Field(
        default=None, description="The default provider, and model: anthropic, openai[:MODEL], offline or sampling."
    )
    supervisor_model: str | None = Field(default=None, description="The supervisor's model string.")
    specialist_model: str | None = Field(default=None, description="The specialists' model string.")
    supervisor_sampling: SamplingSettings | None = Field(
        default=None, description='The supervisor\'s temperature and output limit (JSON: {"temperature": 0.2}).'
    )
    specialist_sampling: SamplingSettings | None = Field(
        default=None, description="The specialists' temperature and output limit (JSON)."
    )
    supervisor_fallback: str | None = Field(
        default=None, description="The supervisor's model when its own keeps failing (overloaded, timeouts)."
    )
    specialist_fallback: str | None = Field(
        default=None, description="The specialists' model when their own keeps failing (overloaded, timeouts)."
    )
    tool_calls: ToolCallMode = Field(
        default="auto",
        description="Whether tool calls a model writes as text (fenced JSON, <tool_call> tags) are read and run: "
        "auto (on for OpenAI-compatible servers other than OpenAI's own API), native (never: such replies go back "
        "to the model) or text (always).",
    )
    supervisor_tool_calls: ToolCallMode | None = Field(default=None, description="The supervisor's; None: tool_calls.")
    specialist_tool_calls: ToolCallMode | None = Field(default=None, description="The specialists'; None: tool_calls.")
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    supervisor_api_key: SecretStr | None = None
    supervisor_base_url: str | None = None
    specialist_api_key: SecretStr | None = None
    specialist_base_url: str | None = None
    max_concurrency: int = Field(default=8, ge=1, description="Model calls in flight at once, per endpoint.")
    requests_per_minute: float | None = Field(default=None, gt=0, description="Per endpoint; default: no limit.")
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Per endpoint; default: no limit.")
    endpoint_limits: dict[str, EndpointLimits] = Field(
        default_factory=dict, description="Limits of one endpoint, by base URL or provider name (JSON)."
    )
    prices: dict[str, str] = Field(
        default_factory=dict, description="The genai-prices provider to price a base URL's calls with (JSON)."
    )
    max_retries: int = Field(default=4, ge=0, description="Retries of a 429/5xx/529 call, with backoff.")
    offline_latency_ms: float = Field(default=0.0, ge=0)
    faults: str = Field(
        default="",
        validation_alias=AliasChoices("MCP_TEAM_FAULTS", "MCP_TEAM_OFFLINE_FAULTS"),
        description="Faults injected into every model, e.g. rate_limit:researcher:1 (see llm.faults).",
    )
    record_dir: str | None = Field(default=None, description="Record every run to DIR/<run id>.jsonl.")

    @field_validator("model", "supervisor_model", "specialist_model", "supervisor_fallback", "specialist_fallback")
    @classmethod
    def _is_a_model_string(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            ref = parse_model(value)
            if info.field_name == "model" and ref.provider is None:
                raise ValueError(
                    f"{value!r} names no provider; write anthropic, openai, offline or sampling, or "
                    f"PROVIDER:MODEL (e.g. openai:{value})"
                )
        return value

    _base_urls = field_validator("anthropic_base_url", "openai_base_url", "supervisor_base_url", "specialist_base_url")(
        check_base_url
    )

    @field_validator("prices", "endpoint_limits")
    @classmethod
    def _urls_without_trailing_slash(cls, value: dict[str, object]) -> dict[str, object]:
        return {k.rstrip("/"): v for k, v in value.items()}

    def configured_backend(self) -> Backend | None:
        """The default provider these settings name or imply, or None. Never raises: a model string
        that does not parse is reported by `build_models`."""
        return self._chosen()[0]

    def backend_chosen_by(self) -> str | None:
        """The field that chose `configured_backend` (e.g. `openai_base_url`), for saying where it came from."""
        return self._chosen()[1]

    def _chosen(self) -> tuple[Backend | None, str | None]:
        named = [_provider_of(text) for text in (self.model, self.supervisor_model, self.specialist_model)]
        if named[0] is not None:
            return named[0], "model"
        for field, provider in (("anthropic_api_key", "anthropic"), ("openai_api_key", "openai"),
                                ("openai_base_url", "openai")):  # fmt: skip
            if getattr(self, field) is not None:
                return cast(Backend, provider), field
        for field, role_provider in zip(("supervisor_model", "specialist_model"), named[1:], strict=True):
            if role_provider not in (None, "offline"):  # one role offline says nothing about the other
                return role_provider, field
        if named[1] is not None and named[2] is not None:  # both roles offline: so is the team
            return named[1], "supervisor_model"
        for field in ("supervisor_api_key", "specialist_api_key"):
            if getattr(self, field) is not None:
                return "anthropic", field
        return None, None

    def backend(self) -> Backend:
        """The default provider, or `ConfigError` listing the options."""
        if (backend := self.configured_backend()) is not None:
            return backend
        raise ConfigError(
            "no model is configured. Choose one:\n"
            "  - anthropic: set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL), or pass --model anthropic\n"
            "  - openai:    set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server (Ollama, vLLM, llama.cpp, "
            "LM Studio) that needs no key, or pass --model openai:MODEL\n"
            "  - offline:   pass --model offline or set MCP_TEAM_MODEL=offline "
            "(deterministic answers, no LLM; for trying things out and tests)\n"
            "  - sampling:  (server only) run on the MCP client's own model through sampling\n"
            "With several keys set, ANTHROPIC_API_KEY wins; --model / MCP_TEAM_MODEL (e.g. openai:gpt-4o-mini) "
            "or a provider in MCP_TEAM_SUPERVISOR_MODEL chooses explicitly."
        )

    def role_model(self, role: str) -> ModelRef:
        """The provider and model name `role` runs on, defaults filled in. Raises `ConfigError`."""
        own = self.supervisor_model if role == SUPERVISOR else self.specialist_model
        ref, default = model_ref_of(own, f"the {role} model"), model_ref_of(self.model, "MCP_TEAM_MODEL")
        provider = (ref.provider if ref else None) or self.backend()
        name = (ref.name if ref else None) or (default.name if default and default.provider == provider else None)
        if provider in ("sampling", "replay"):
            raise ConfigError(
                f"the {role} model cannot be {provider}: {provider} runs the whole team (--model {provider}"
                f"{':FILE' if provider == 'replay' else ''})"
            )
        return ModelRef(provider, name or DEFAULT_MODELS[provider][role])

    def secrets(self) -> list[str]:
        """Every key these settings hold, for redaction."""
        keys = (self.anthropic_api_key, self.openai_api_key, self.supervisor_api_key, self.specialist_api_key)
        return [k.get_secret_value() for k in keys if k is not None]


def _provider_of(text: str | None) -> Backend | None:
    try:
        return parse_model(text).provider if text else None
    except ValueError:
        return None


def model_ref_of(text: str | None, what: str) -> ModelRef | None:
    """`text` parsed as a model string (None stays None); a `ConfigError` naming `what` when it is not one."""
    if text is None:
        return None
    try:
        return parse_model(text)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from None
