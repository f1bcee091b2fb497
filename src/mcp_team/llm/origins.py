"""Where a role's model and endpoint come from, for `mcp-team check`.

A user whose OPENAI_BASE_URL points at a local server (Ollama, vLLM) and who named no model runs on OpenAI's
default names there: the first call fails (a 404). Seeing each role's model, its endpoint and the setting each
came from before the run lets them see that; `default_name_elsewhere` says it outright.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

from mcp_team.errors import ConfigError
from mcp_team.llm.settings import ModelSettings, parse_model

PROVIDER_APIS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
_URL_VARIABLES = {
    "anthropic": ("MCP_TEAM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
    "openai": ("MCP_TEAM_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
}
_KEY_VARIABLES = {
    "anthropic": ("MCP_TEAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    "openai": ("MCP_TEAM_OPENAI_API_KEY", "OPENAI_API_KEY"),
}


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


def role_model(settings: ModelSettings, role: str, in_file: Collection[str] = (), file: str = "") -> RoleModel:
    """What `role` runs on with `settings`; `in_file`: the settings' fields the team `file` set (they win over
    the environment). Never raises: a role that cannot run says why in `model`."""
    if settings.model is not None and (whole := parse_model(settings.model)).provider in ("offline", "sampling"):
        endpoint = "-" if whole.provider == "offline" else "the MCP client's model (inside mcp-team serve)"
        return RoleModel(role, str(whole), f"{_variable('MCP_TEAM_MODEL')} (the whole team)", endpoint)
    if settings.model is not None and whole.provider == "replay":
        return RoleModel(role, str(whole), f"{_variable('MCP_TEAM_MODEL')} (the whole team)")
    if settings.configured_backend() is None:
        return RoleModel(role, "not configured (see mcp-team run --help)", "")
    try:
        ref = settings.role_model(role)
    except ConfigError as exc:
        return RoleModel(role, f"invalid: {exc}", "")
    own_text = getattr(settings, f"{role}_model")
    own = parse_model(own_text) if own_text else None
    field = f"{role}_model"
    own_from = f"[models] {role} in {file}" if field in in_file else _variable(f"MCP_TEAM_{role.upper()}_MODEL")
    default = parse_model(settings.model) if settings.model else None
    is_default = False
    if own is not None and own.name:
        model_from = own_from
    elif default is not None and default.name and default.provider == ref.provider:
        model_from = _variable("MCP_TEAM_MODEL")
    else:
        model_from, is_default = f"{ref.provider}'s default model", True
    if own is None or own.provider is None:
        model_from += f"; {ref.provider} chosen by {_backend_from(settings)}"
    elif not own.name:
        model_from += f"; {ref.provider} named in {own_from}"
    if ref.provider == "offline":
        return RoleModel(role, str(ref), model_from)
    role_url = getattr(settings, f"{role}_base_url")
    provider_url = getattr(settings, f"{ref.provider}_base_url")
    if role_url is not None:
        endpoint, endpoint_from = role_url, "endpoint from " + _variable(f"MCP_TEAM_{role.upper()}_BASE_URL")
    elif provider_url is not None:
        endpoint, endpoint_from = provider_url, "endpoint from " + _variable(*_URL_VARIABLES[ref.provider or ""])
    else:
        unset = f"no base URL set ({_URL_VARIABLES[ref.provider or ''][1]}, MCP_TEAM_{role.upper()}_BASE_URL)"
        endpoint = f"the provider's API ({PROVIDER_APIS[ref.provider or '']})"
        return RoleModel(role, str(ref), model_from, endpoint, unset, is_default)
    own_api = endpoint.rstrip("/").startswith(PROVIDER_APIS[ref.provider or ""])
    return RoleModel(role, str(ref), model_from, endpoint, endpoint_from, is_default, own_api)


def default_name_elsewhere(roles: list[RoleModel]) -> str | None:
    """A warning when a role runs a provider's default model name on another server, where it likely has another
    name (Ollama's are `qwen2.5:7b`, `llama3.1`): the run would stop at its first call."""
    off = [r for r in roles if r.default_name and not r.provider_api]
    if not off:
        return None
    what = ", ".join(f"the {r.role}'s {r.model} at {r.endpoint}" for r in off)
    fixes = " and ".join(f"MCP_TEAM_{r.role.upper()}_MODEL={r.model.partition(':')[0]}:NAME" for r in off)
    return (
        f"{what}: a default name of the provider's own API, which a server of your own (Ollama, vLLM) likely does "
        f"not serve, so the first call would fail; name the model it serves with {fixes} (or [models] in the "
        "team file)"
    )


def _variable(*names: str) -> str:
    """The first of `names` set (non-empty) in the environment, as pydantic-settings reads it (any case)."""
    present = {k.upper() for k, v in os.environ.items() if v}
    return next((n for n in names if n in present), names[-1])


def _backend_from(settings: ModelSettings) -> str:
    """The setting that chose the default provider, as `ModelSettings.configured_backend` reads them."""
    if settings.model is not None:  # it names a provider (ModelSettings checks that)
        return _variable("MCP_TEAM_MODEL")
    if settings.anthropic_api_key is not None:
        return _variable(*_KEY_VARIABLES["anthropic"])
    if settings.openai_api_key is not None:
        return _variable(*_KEY_VARIABLES["openai"])
    if settings.openai_base_url is not None:
        return _variable(*_URL_VARIABLES["openai"])
    if settings.supervisor_model or settings.specialist_model:
        return "the other role's model"
    return "MCP_TEAM_SUPERVISOR_API_KEY / MCP_TEAM_SPECIALIST_API_KEY (anthropic)"
