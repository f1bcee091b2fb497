"""Models that wrap models (as pydantic-ai's `WrapperModel` does): recording, replay and faults are
wrappers around any backend, never features of one.

A wrapper passes every attribute it does not define to the model it wraps, so it calls the same
endpoint (`base_url`), is priced the same way (`price_provider`) and shares the same limiter.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_team.llm.call import ModelSet
from mcp_team.llm.types import Model, ModelRequest, ModelResponse


class WrapperModel:
    """A model that delegates to `wrapped`; subclasses override `complete`."""

    def __init__(self, wrapped: Model) -> None:
        self.wrapped = wrapped

    @property
    def name(self) -> str:
        return self.wrapped.name

    @property
    def provider(self) -> str:
        return self.wrapped.provider

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.wrapped.complete(request)

    def __getattr__(self, item: str) -> Any:
        # Only reached for attributes the wrapper does not have: `base_url`, `price_provider`, ...
        if item == "wrapped":  # not set yet (e.g. during copy): never recurse
            raise AttributeError(item)
        return getattr(self.wrapped, item)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


class SamplingSettings(BaseModel):
    """A member's sampling settings (team file, `MCP_TEAM_*_SAMPLING`); None: the engine's or the model's."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, description="The output limit of each call.")


class TunedModel(WrapperModel):
    """`wrapped` with a member's sampling settings on every request it gets.

    `llm.call.chat` applies them (`sampling_settings`) before the call is counted, so the budget and the
    endpoint's limits see the output limit that is sent, and may lower it; `complete` then sends the request
    as it is."""

    def __init__(self, wrapped: Model, sampling: SamplingSettings) -> None:
        super().__init__(wrapped)
        self.sampling = sampling

    def sampling_settings(self) -> dict[str, Any]:
        """The request fields these settings set."""
        return self.sampling.model_dump(exclude_none=True)


class ToolCallsModel(WrapperModel):
    """`wrapped` with a `tool_calls` setting of its own (`auto`, `native` or `text`): whether calls it writes as
    text are read and run (see `llm.text_calls.reads_text_calls`)."""

    def __init__(self, wrapped: Model, tool_calls: str) -> None:
        super().__init__(wrapped)
        self.tool_calls = tool_calls


def map_models(models: ModelSet, wrap: Callable[[Model], Model]) -> ModelSet:
    """`models` with every model wrapped by `wrap`, each distinct model once.

    The copy shares everything else with `models`, its limiters included, so the calls of the
    wrapped set still count against the limits of the set it came from (a server's runs all share
    one set, and a wrapped copy per run must not get a fresh allowance).
    """
    made: dict[int, Model] = {}

    def once(model: Model) -> Model:
        if id(model) not in made:
            made[id(model)] = wrap(model)
        return made[id(model)]

    wrapped = copy.copy(models)  # a shallow copy: no __post_init__, so the limiter is the same object
    wrapped.models = {role: once(m) for role, m in models.models.items()}
    wrapped.members = {name: once(m) for name, m in models.members.items()}
    wrapped.fallbacks = {name: once(m) for name, m in models.fallbacks.items()}
    return wrapped
