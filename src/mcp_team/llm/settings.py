"""Model settings from the environment (and CLI flags), and building the `ModelSet` they describe.

Choice of backend: `--model` / `MCP_TEAM_MODEL` first, then `ANTHROPIC_API_KEY` being set means
anthropic; otherwise a `ConfigError` that lists the options. The offline backend is used only
when asked for by name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_team.llm.call import SPECIALIST, SUPERVISOR, ModelSet

Backend = Literal["anthropic", "offline", "sampling"]


class ConfigError(Exception):
    """Settings that cannot work; the message says how to fix them."""


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MCP_TEAM_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    model: Backend | None = Field(default=None, description="Backend: anthropic, offline or sampling.")
    supervisor_model: str = "claude-sonnet-4-5"
    specialist_model: str = "claude-haiku-4-5"
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("MCP_TEAM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
    )
    supervisor_api_key: SecretStr | None = None
    supervisor_base_url: str | None = None
    specialist_api_key: SecretStr | None = None
    specialist_base_url: str | None = None
    max_concurrency: int = Field(default=8, ge=1, description="Model calls in flight at once, all runs together.")
    max_retries: int = Field(default=4, ge=0, description="Retries of a 429/5xx/529 call, with backoff.")
    offline_latency_ms: float = Field(default=0.0, ge=0)
    offline_faults: str = ""

    def configured_backend(self) -> Backend | None:
        """The backend these settings name or imply (an API key implies anthropic); None if none."""
        if self.model is not None:
            return self.model
        if any(k is not None for k in (self.anthropic_api_key, self.supervisor_api_key, self.specialist_api_key)):
            return "anthropic"
        return None

    def backend(self) -> Backend:
        """The backend these settings select, or `ConfigError` listing the options."""
        if (backend := self.configured_backend()) is not None:
            return backend
        raise ConfigError(
            "no model is configured. Choose one:\n"
            "  - anthropic: set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL), or pass --model anthropic\n"
            "  - offline:   pass --model offline or set MCP_TEAM_MODEL=offline "
            "(deterministic answers, no LLM; for trying things out and tests)\n"
            "  - sampling:  (server only) run on the MCP client's own model through sampling"
        )


def build_models(settings: ModelSettings) -> ModelSet:
    """The `ModelSet` for the selected backend. Imports the anthropic SDK only when it is used."""
    backend = settings.backend()
    if backend == "offline":
        from mcp_team.llm.offline import OfflineModel, parse_faults

        try:
            faults = parse_faults(settings.offline_faults)
        except ValueError as exc:
            raise ConfigError(f"MCP_TEAM_OFFLINE_FAULTS: {exc}") from None
        model = OfflineModel(latency=settings.offline_latency_ms / 1000, faults=faults)
        return ModelSet.single(model, settings.max_concurrency)
    if backend == "anthropic":
        from mcp_team.llm.anthropic import AnthropicModel

        def role(name: str, key: SecretStr | None, base_url: str | None) -> AnthropicModel:
            key = key or settings.anthropic_api_key
            if key is None:
                raise ConfigError(
                    "the anthropic backend needs an API key: set ANTHROPIC_API_KEY "
                    "(or MCP_TEAM_SUPERVISOR_API_KEY / MCP_TEAM_SPECIALIST_API_KEY per role)"
                )
            return AnthropicModel(
                name,
                api_key=key.get_secret_value(),
                base_url=base_url or settings.anthropic_base_url,
                max_retries=settings.max_retries,
            )

        models = {
            SUPERVISOR: role(settings.supervisor_model, settings.supervisor_api_key, settings.supervisor_base_url),
            SPECIALIST: role(settings.specialist_model, settings.specialist_api_key, settings.specialist_base_url),
        }
        return ModelSet(models, settings.max_concurrency)
    raise ConfigError(
        "the sampling backend runs on the MCP client's model and exists only inside `mcp-team serve`; "
        "for `mcp-team run` choose --model anthropic or --model offline"
    )
