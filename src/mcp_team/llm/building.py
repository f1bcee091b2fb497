"""The `ModelSet` that `ModelSettings` describe (`build_models`): each role's model, its fallback, the members'
own models, sampling settings and tool-call modes wrapped around them, one limiter per endpoint; and how a
role's model is described to a user (`describe_model`). The settings and model strings: `llm.settings`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from mcp_team.errors import ConfigError
from mcp_team.llm.call import SPECIALIST, SUPERVISOR, ModelSet
from mcp_team.llm.limits import EndpointLimits, Limiters
from mcp_team.llm.settings import (
    DEFAULT_MODELS,
    Backend,
    MemberModel,
    ModelRef,
    ModelSettings,
    model_ref_of,
    parse_model,
)
from mcp_team.llm.types import Model
from mcp_team.llm.wrappers import SamplingSettings, ToolCallsModel, TunedModel


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
    ref = model_ref_of(text, what) or ModelRef(None, None)
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
