"""The model interface: what goes into a model call, what comes out, and how it fails.

Every backend (anthropic, offline, scripted, and later MCP sampling) takes a `ModelRequest`
and returns a `ModelResponse`, or raises `ModelError`. Nothing above this layer knows which
backend it is talking to.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from mcp_team.errors import McpTeamError

Phase = Literal["act", "plan", "refine", "synthesize", "specialist"]
"""Why a call is made; recorded on the `chat` span so planning and synthesis are told apart."""

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


_M = TypeVar("_M", bound=BaseModel)


class TextBlock(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Frozen):
    """A tool call. `input_error` is set (and `input` empty) when the model's arguments could not be
    read, e.g. not valid JSON: such a call is answered with that error, for the model to fix, never run."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    input_error: str | None = None
    # Left out of every dump: a request holding the call hashes as it did before the field existed (recordings
    # made then still replay), and a recording keeps the reply as the model wrote it (`llm.text_calls`).
    from_text: bool = Field(
        default=False, exclude=True, description="The model wrote the call as text; it was read from the text."
    )

    @cached_property
    def input_json(self) -> str:
        """`input` as JSON text. Cached: a supervisor's K handoff calls are sized for every later turn's
        prompt estimate (and read back by the offline model), K JSON encodings a turn otherwise."""
        return json.dumps(self.input)


class ToolResultBlock(_Frozen):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock


class Message(_Frozen):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    @property
    def blocks(self) -> list[ContentBlock]:
        """The content as a list of blocks, whatever form it was given in."""
        if isinstance(self.content, str):
            return [TextBlock(text=self.content)]
        return list(self.content)


class ToolDefinition(_Frozen):
    name: str
    description: str
    input_schema: dict[str, Any]

    @cached_property
    def prompt_chars(self) -> int:
        """Characters it adds to a prompt: its description and schema. Cached: a supervisor's K handoff
        tools go out with every turn, and the size of each is asked for every call."""
        return len(self.description) + len(json.dumps(self.input_schema))


class Usage(_Frozen):
    """Token counts and cost of one call or a sum of calls. `input_tokens` includes cached input.

    `cost_usd` is what the calls cost in US dollars; null when a call's price is unknown (a local model,
    offline, the MCP client's own): unknown is not free, so a sum with any unknown part is null too. No
    calls cost 0.
    """

    # (Also the JSON schema's description, which clients read: `cost_usd` is priced by llm.cost in llm.call.chat.)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        # On every call and handoff (about five sums a handoff). Every first sum (a handoff's, a specialist's, a
        # member's) starts from no usage: then `other` is the sum pydantic would build (the same values, every
        # field set), and being frozen it can be shared.
        if self is NO_USAGE and other.__pydantic_fields_set__ == _ALL_SET and type(other) is Usage:
            return other
        # Otherwise `model_construct` costs twice this, and the sum of two valid counts needs no validation. Read
        # from `__dict__`: pydantic's attribute access is slower than a dict's.
        a, b = self.__dict__, other.__dict__
        cost = None if a["cost_usd"] is None or b["cost_usd"] is None else a["cost_usd"] + b["cost_usd"]
        return assembled(
            Usage,
            {
                "input_tokens": a["input_tokens"] + b["input_tokens"],
                "output_tokens": a["output_tokens"] + b["output_tokens"],
                "cache_read_input_tokens": a["cache_read_input_tokens"] + b["cache_read_input_tokens"],
                "cache_creation_input_tokens": a["cache_creation_input_tokens"] + b["cache_creation_input_tokens"],
                "cost_usd": cost,
            },
            set(_USAGE_FIELDS),
        )


_new = object.__new__
_set = object.__setattr__


def assembled(cls: type[_M], values: dict[str, Any], fields_set: set[str]) -> _M:
    """An instance of the model `cls` (no extra fields, no private attributes) with `values` (every field,
    already valid): the state `model_construct` leaves, at a third of its cost. For engine-made values on
    the hot path only."""
    out = _new(cls)
    _set(out, "__dict__", values)
    _set(out, "__pydantic_fields_set__", fields_set)
    _set(out, "__pydantic_extra__", None)
    _set(out, "__pydantic_private__", None)
    return out


def defaults_of(cls: type[BaseModel]) -> dict[str, Any]:
    """Every field of the model `cls` with its default, in field order (None for a required field): the
    `defaults` of `built`. A default factory is called once, here, so its value is shared by every model
    built from them: give a field whose default is mutable in `values`."""
    return {
        name: None if field.is_required() else field.get_default(call_default_factory=True)
        for name, field in cls.model_fields.items()
    }


def built(cls: type[_M], defaults: dict[str, Any], values: dict[str, Any]) -> _M:
    """What `cls(**values)` gives (same values, field order and fields set; every other field its default from
    `defaults`, see `defaults_of`) when `values` are valid already: engine-made values on the hot path, never
    what a user, a model or a client sent."""
    return assembled(cls, {**defaults, **values}, set(values))


def replaced(model: _M, **changes: Any) -> _M:
    """`model.model_copy(update=changes)` for a frozen model of this module (no extra fields, no private
    attributes), at a third of its cost: a model call's response gets its priced usage this way."""
    return assembled(type(model), {**model.__dict__, **changes}, model.__pydantic_fields_set__ | changes.keys())


_USAGE_FIELDS = tuple(Usage.model_fields)
_ALL_SET = frozenset(_USAGE_FIELDS)

NO_USAGE = Usage()
"""No calls yet. One shared instance (a `Usage` is frozen): a validated `Usage()` on every handoff record,
specialist result and sum costs more than the rest of building them."""


def no_usage() -> Usage:
    """`NO_USAGE`, as a `default_factory` (not `default=`, which would put it in the JSON schemas)."""
    return NO_USAGE


class ModelRequest(_Frozen):
    system: str
    messages: list[Message]
    tools: list[ToolDefinition] = Field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = Field(default=None, ge=0, le=2, description="None: the model's default.")
    reply_schema: dict[str, Any] | None = Field(
        default=None,
        description="A JSON schema the reply's text must follow, sent where the server constrains replies to one "
        "(an OpenAI-compatible `response_format`); a backend without such a feature leaves it out.",
    )
    phase: Phase = "specialist"
    member: str = Field(
        default="",
        description="Who asks: `supervisor` (its turns, refine, synthesis), `planner`, or the specialist's name; "
        "empty for a request that came from outside the engine (e.g. over a wire that has no such field).",
    )


class ModelResponse(_Frozen):
    content: list[TextBlock | ToolUseBlock]
    stop_reason: StopReason = "end_turn"
    usage: Usage = Field(default_factory=no_usage)
    model: str
    id: str | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


ErrorKind = Literal[
    "rate_limited",  # 429
    "server_error",  # 5xx
    "overloaded",  # 529
    "timeout",
    "connection",
    "auth",
    "bad_request",
    "unavailable",  # no backend can serve the call (e.g. no sampling support)
]


class ModelError(McpTeamError):
    """A model call that failed after the backend's own retries.

    `kind` is low-cardinality (it becomes `error.type` on spans); `message` is for people and
    never contains credentials.
    """

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status


@runtime_checkable
class Model(Protocol):
    """One model backend. Implementations must be safe to call concurrently."""

    @property
    def name(self) -> str:
        """The model name recorded as `gen_ai.request.model` (e.g. `claude-sonnet-5-5`)."""
        ...

    @property
    def provider(self) -> str:
        """`gen_ai.provider.name`: `anthropic`, `offline`, `scripted`, `mcp_sampling`."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one model call. Raises `ModelError` on failure."""
        ...
