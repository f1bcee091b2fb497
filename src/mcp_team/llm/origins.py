"""Where a role's model and endpoint come from, for `mcp-team check`.

A user whose OPENAI_BASE_URL points at a local server (Ollama, vLLM) and who named no model runs on OpenAI's
default names there: the first call fails (a 404). Seeing each role's model, its endpoint and the setting each
came from before the run lets them see that; `default_name_elsewhere` says it outright.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from mcp_team.errors import ConfigError
from mcp_team.llm.settings import ModelSettings, env_variable, env_variables, parse_model

PROVIDER_APIS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}


@dataclass(frozen=True)
class RoleModel:
    """A role's model (`provider:model`) and endpoint, each with the setting it came from."""

    role: str
    model: str
    model_from: str
    endpoint: str = "-"  # "-": none (offline, replay)
    endpoint_from: str = ""  # where its base URL was set, or that none was
    default_name: bool = False  # the model name is its provider's default, not one the user gave
    provider_api: bool = True  # the endpoint is the provider's own API

    @property
    def line(self) -> str:
        return f"{self.model} at {self.endpoint}" if self.endpoint != "-" else self.model

    @property
    def origin(self) -> str:
        """Where its model and endpoint were set, or "" when it has no model (the line says why)."""
        if not self.model_from:
            return ""
        return f"model from {self.model_from}" + (f"; {self.endpoint_from}" if self.endpoint_from else "")


def role_model(
    settings: ModelSettings,
    role: str,
    in_file: Collection[str] = (),
    file: str = "",
    environ: Mapping[str, str] | None = None,
) -> RoleModel:
    """What `role` runs on with `settings`; `in_file`: the settings' fields the team `file` set (they win over
    the environment); `environ`: the environment `settings` were read from, to name the variable of two (such
    as OPENAI_BASE_URL and MCP_TEAM_OPENAI_BASE_URL) that the user set (None: the first of each is named).
    Never raises: a role that cannot run says why in `model`."""
    env: Mapping[str, str] = environ or {}

    if settings.model is not None and (whole := parse_model(settings.model)).provider in ("offline", "sampling"):
        endpoint = "-" if whole.provider == "offline" else "the MCP client's model (inside mcp-team serve)"
        return RoleModel(role, str(whole), f"{_variable('model', env)} (the whole team)", endpoint)
    if settings.model is not None and whole.provider == "replay":
        return RoleModel(role, str(whole), f"{_variable('model', env)} (the whole team)")
    if settings.configured_backend() is None:
        return RoleModel(role, "not configured (see mcp-team run --help)", "")
    try:
        ref = settings.role_model(role)
    except ConfigError as exc:
        return RoleModel(role, f"invalid: {exc}", "")
    own_text = getattr(settings, f"{role}_model")
    own = parse_model(own_text) if own_text else None
    field = f"{role}_model"
    own_from = f"[models] {role} in {file}" if field in in_file else _variable(field, env)
    default = parse_model(settings.model) if settings.model else None
    is_default = False
    if own is not None and own.name:
        model_from = own_from
    elif default is not None and default.name and default.provider == ref.provider:
        model_from = _variable("model", env)
    else:
        model_from, is_default = f"{ref.provider}'s default model", True
    if own is None or own.provider is None:
        model_from += f"; {ref.provider} chosen by {_backend_from(settings, env)}"
    elif not own.name:
        model_from += f"; {ref.provider} named in {own_from}"
    if ref.provider == "offline":
        return RoleModel(role, str(ref), model_from)
    role_url = getattr(settings, f"{role}_base_url")
    provider_url = getattr(settings, f"{ref.provider}_base_url")
    if role_url is not None:
        endpoint, endpoint_from = role_url, "endpoint from " + _variable(f"{role}_base_url", env)
    elif provider_url is not None:
        endpoint, endpoint_from = provider_url, "endpoint from " + _variable(f"{ref.provider}_base_url", env)
    else:
        provider_variable = env_variables(ModelSettings, f"{ref.provider}_base_url")[-1]  # OPENAI_BASE_URL
        unset = f"no base URL set ({provider_variable}, {_variable(f'{role}_base_url', env)})"
        endpoint = f"the provider's API ({PROVIDER_APIS[ref.provider or '']})"
        return RoleModel(role, str(ref), model_from, endpoint, unset, is_default)
    own_api = endpoint.rstrip("/").startswith(PROVIDER_APIS[ref.provider or ""])
    return RoleModel(role, str(ref), model_from, endpoint, endpoint_from, is_default, own_api)


def default_name_elsewhere(roles: list[RoleModel], asked: Collection[str] = ()) -> str | None:
    """A warning when a role runs a provider's default model name on another server, where it may have another
    name (Ollama's are `qwen2.5:7b`, `llama3.1`): the run would stop at its first call. `asked`: the endpoints
    whose listing of the models they serve was read (`llm.served`): that says it, not this guess."""
    off = [r for r in roles if r.default_name and not r.provider_api and r.endpoint.rstrip("/") not in asked]
    if not off:
        return None
    what = ", ".join(f"the {r.role}'s {r.model} at {r.endpoint}" for r in off)
    provider = off[0].model.partition(":")[0]
    roles_fix = " and ".join(f"MCP_TEAM_{r.role.upper()}_MODEL={r.model.partition(':')[0]}:NAME" for r in off)
    return (
        f"{what}: a default name of the provider's own API, which a server of your own may not serve (llama.cpp's "
        "answers any name; Ollama's and vLLM's do not), and it could not be asked which it serves; if the first "
        f"call fails, name the model it serves: --model {provider}:NAME (or MCP_TEAM_MODEL={provider}:NAME; per "
        f"role {roles_fix}, or [models] in the team file)"
    )


def _variable(field: str, environ: Mapping[str, str]) -> str:
    """The variable that sets the `ModelSettings` field (of two, the one the user set in `environ`)."""
    return env_variable(ModelSettings, field, environ)


def _backend_from(settings: ModelSettings, environ: Mapping[str, str]) -> str:
    """The setting that chose the default provider (`ModelSettings.backend_chosen_by`)."""
    field = settings.backend_chosen_by()
    if field in ("supervisor_model", "specialist_model"):
        return "the other role's model"
    if field in ("supervisor_api_key", "specialist_api_key"):
        return "MCP_TEAM_SUPERVISOR_API_KEY / MCP_TEAM_SPECIALIST_API_KEY (anthropic)"
    return _variable(field or "model", environ)
