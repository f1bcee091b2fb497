"""Model settings from the environment (and CLI flags), model strings, and the `ModelSet` they describe.

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
the CLI does) and passes `environ=os.environ` to `build_models` only if a member names its key variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_team.errors import ConfigError
from mcp_team.llm.call import SPECIALIST, SUPERVISOR, ModelSet
from mcp_team.llm.limits import EndpointLimits, Limiters
from mcp_team.llm.text_calls import ToolCallMode
from mcp_team.llm.types import Model
from mcp_team.llm.wrappers import SamplingSettings, ToolCallsModel, TunedModel

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
        ref, default = _parse(own, f"the {role} model"), _parse(self.model, "MCP_TEAM_MODEL")
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


def _parse(text: str | None, what: str) -> ModelRef | None:
    if text is None:
        return None
    try:
        return parse_model(text)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from None


def build_models(
    settings: ModelSettings,
    members: Mapping[str, MemberModel] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ModelSet:
    """The `ModelSet` the settings describe: a model per role, and per specialist named in `members`.

    Providers mix freely; identical models share one instance (and its connections). The SDKs are
    imported only for the providers in use. `environ` holds the variables members name as `api_key_env`
    (the CLI and the server pass the process environment); None: none is given, and a member that names
    one is a `ConfigError` saying so.
    """
    backend = settings.backend()
    if backend == "sampling":
        raise ConfigError(
            "the sampling backend runs on the MCP client's model and exists only inside `mcp-team serve`; "
            "for `mcp-team run` choose --model anthropic, --model openai[:MODEL] or --model offline"
        )
    from mcp_team.llm.faults import parse_faults, with_faults

    try:
        faults = parse_faults(settings.faults)
    except ValueError as exc:
        raise ConfigError(f"--fault / MCP_TEAM_FAULTS: {exc}") from None
    if settings.model is not None and (ref := parse_model(settings.model)).provider == "replay":
        from mcp_team.llm.replay import replay_models

        return with_faults(replay_models(ref.name or "", settings.max_concurrency), faults)  # the recorded models
    return with_faults(_build(settings, backend, members, env=environ), faults)


def _build(
    settings: ModelSettings,
    backend: Backend,
    members: Mapping[str, MemberModel] | None,
    *,
    env: Mapping[str, str] | None,
) -> ModelSet:
    limits = Limiters(
        EndpointLimits(
            max_concurrency=settings.max_concurrency,
            requests_per_minute=settings.requests_per_minute,
            tokens_per_minute=settings.tokens_per_minute,
        ),
        settings.endpoint_limits,
    )
    factory = _Factory(settings)
    if settings.model is not None and parse_model(settings.model).provider == "offline":
        return ModelSet.single(factory.offline(), settings.max_concurrency)  # the whole team, as asked
    roles: dict[str, Model] = {}
    for role in (SUPERVISOR, SPECIALIST):
        ref = settings.role_model(role)
        key = settings.supervisor_api_key if role == SUPERVISOR else settings.specialist_api_key
        url = settings.supervisor_base_url if role == SUPERVISOR else settings.specialist_base_url
        roles[role] = factory.model(
            ref,
            key,
            url,
            f"MCP_TEAM_{role.upper()}_API_KEY",
            key_from=f"MCP_TEAM_{role.upper()}_API_KEY" if key is not None else None,
            url_from=f"MCP_TEAM_{role.upper()}_BASE_URL" if url is not None else None,
        )
        sampling = settings.supervisor_sampling if role == SUPERVISOR else settings.specialist_sampling
        if sampling is not None:
            roles[role] = TunedModel(roles[role], sampling)
        mode = (settings.supervisor_tool_calls if role == SUPERVISOR else settings.specialist_tool_calls) or (
            settings.tool_calls
        )
        if mode != "auto":
            roles[role] = ToolCallsModel(roles[role], mode)
    fallbacks: dict[str, Model] = {}
    for role, text in ((SUPERVISOR, settings.supervisor_fallback), (SPECIALIST, settings.specialist_fallback)):
        if text is not None:
            ref = _member_ref(text, backend, f"the {role}'s fallback")
            fallbacks[role] = factory.model(ref, None, None, None, f"the {role}'s fallback model")
    own: dict[str, Model] = {}
    for name, choice in (members or {}).items():
        key = None
        if choice.api_key_env is not None:
            if env is None:
                raise ConfigError(
                    f"specialist {name!r}: its API key variable {choice.api_key_env} cannot be read: no environment "
                    "was given (build_models(..., environ=os.environ))"
                )
            value = env.get(choice.api_key_env)
            if not value:
                raise ConfigError(f"specialist {name!r}: its API key variable {choice.api_key_env} is not set")
            key = SecretStr(value)
        if choice.model is not None or choice.base_url is not None or key is not None:
            ref = _member_ref(choice.model, backend, f"specialist {name!r}")
            # Its own key: its api_key_env, not the role's variables (they are not read for it).
            where = choice.api_key_env or f'api_key_env = "VARIABLE" in specialist {name!r}\'s entry'
            own[name] = factory.model(
                ref,
                key,
                choice.base_url,
                where,
                f"specialist {name!r}",
                key_from=choice.api_key_env,
                url_from=f"base_url of specialist {name!r} in the team file" if choice.base_url else None,
            )
        if choice.sampling is not None:
            own[name] = _tuned(own.get(name) or roles[choice.role], choice.sampling)
        # Its own setting, else its role's (a model of its own does not inherit the role model's wrapper).
        role_mode = settings.supervisor_tool_calls if choice.role == SUPERVISOR else settings.specialist_tool_calls
        mode = choice.tool_calls or role_mode or settings.tool_calls
        if (choice.tool_calls is not None or name in own) and mode != "auto":
            own[name] = ToolCallsModel(own.get(name) or roles[choice.role], mode)
        if choice.fallback is not None:
            ref = _member_ref(choice.fallback, backend, f"specialist {name!r}: fallback")
            fallbacks[name] = factory.model(ref, None, None, None, f"specialist {name!r}'s fallback model")
    return ModelSet(roles, settings.max_concurrency, members=own, limits=limits, fallbacks=fallbacks)


def _tuned(model: Model, sampling: SamplingSettings) -> Model:
    """`model` with `sampling` on its requests; over a role's own settings, the member's win."""
    if isinstance(model, TunedModel):
        merged = {**model.sampling.model_dump(exclude_none=True), **sampling.model_dump(exclude_none=True)}
        return TunedModel(model.wrapped, SamplingSettings(**merged))
    return TunedModel(model, sampling)


def describe_model(settings: ModelSettings, role: str, member: MemberModel | None = None) -> str:
    """The model a member runs on, as `provider:model` (with its endpoint and fallback when it has them),
    for `mcp-team check`; says what is missing instead when nothing is configured. Never raises."""
    try:
        if settings.model is not None and parse_model(settings.model).provider in ("offline", "sampling", "replay"):
            return str(settings.model)
        if settings.configured_backend() is None:
            return "not configured (see mcp-team run --help)"
        own = member is not None and (member.model is not None or member.base_url is not None)
        ref = _member_ref(member.model, settings.backend(), "") if own and member else settings.role_model(role)
        text = str(ref) + (f" at {member.base_url}" if member and member.base_url else "")
        fallback = member.fallback if member and member.fallback else getattr(settings, f"{role}_fallback", None)
        return text + (f" (fallback {fallback})" if fallback else "")
    except (ConfigError, ValueError) as exc:
        return f"invalid: {exc}"


def _member_ref(text: str | None, backend: Backend, what: str) -> ModelRef:
    """The provider and model a member's (or fallback's) model string names, defaults filled in."""
    ref = _parse(text, what) or ModelRef(None, None)
    provider = ref.provider or backend
    if provider in ("sampling", "replay"):
        raise ConfigError(f"{what}: a specialist's model cannot be {provider}")
    return ModelRef(provider, ref.name or DEFAULT_MODELS[provider][SPECIALIST])


_ROLE_KEYS = "MCP_TEAM_SUPERVISOR_API_KEY / MCP_TEAM_SPECIALIST_API_KEY per role"


class _Factory:
    """Makes each distinct model once."""

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._made: dict[tuple[str, str, str | None, str | None], Model] = {}

    def offline(self) -> Model:
        from mcp_team.llm.offline import OfflineModel

        if ("offline", "", None, None) not in self._made:
            model = OfflineModel(latency=self.settings.offline_latency_ms / 1000)
            self._made[("offline", "", None, None)] = model
        return self._made[("offline", "", None, None)]

    def model(
        self,
        ref: ModelRef,
        key: SecretStr | None,
        base_url: str | None,
        key_variable: str | None,
        who: str = "",
        *,
        key_from: str | None = None,
        url_from: str | None = None,
    ) -> Model:
        """The model `ref` names, with `key` and `base_url` when given, else its provider's. `key_variable`: where
        else its key may be set, for the message when none is (None: nowhere else, as for a fallback model);
        `who` uses it (`specialist 'scout'`), named first in that message. `key_from` and `url_from` say where
        the given `key` and `base_url` were set, for the model's errors (a 401 says which key to check)."""
        s = self.settings
        if ref.provider == "offline":
            return self.offline()
        name = ref.name or ""
        other = "" if key_variable is None else f" (or {key_variable or _ROLE_KEYS})"
        whose = f"{who}: " if who else ""
        if ref.provider == "anthropic":
            key_setting = (key_from if key is not None else None) or "ANTHROPIC_API_KEY"
            url_setting = (url_from if base_url is not None else None) or "ANTHROPIC_BASE_URL"
            key, base_url = key or s.anthropic_api_key, base_url or s.anthropic_base_url
            if key is None:
                raise ConfigError(f"{whose}the anthropic backend needs an API key: set ANTHROPIC_API_KEY{other}")
        else:
            key_setting = (key_from if key is not None else None) or "OPENAI_API_KEY"
            url_setting = (url_from if base_url is not None else None) or "OPENAI_BASE_URL"
            key, base_url = key or s.openai_api_key, base_url or s.openai_base_url
            if key is None and base_url is None:
                raise ConfigError(
                    f"{whose}the openai backend needs an API key: set OPENAI_API_KEY{other}; "
                    "a local server (OPENAI_BASE_URL) needs none"
                )
        secret = key.get_secret_value() if key is not None else None
        made_key = (ref.provider or "", name, base_url, secret)
        if made_key not in self._made:
            options: dict[str, Any] = {
                "api_key": secret,
                "base_url": base_url,
                "max_retries": s.max_retries,
                "price_provider": s.prices.get(base_url.rstrip("/")) if base_url else None,
                "key_setting": key_setting,
                "url_setting": url_setting,
            }
            if ref.provider == "anthropic":
                from mcp_team.llm.anthropic import AnthropicModel

                self._made[made_key] = AnthropicModel(name, **options)
            else:
                from mcp_team.llm.openai import OpenAIModel

                self._made[made_key] = OpenAIModel(name, **options)
        return self._made[made_key]
