"""What the OpenAI-compatible servers of a team's models say about themselves, for `mcp-team check` and `run`.

A user whose OPENAI_BASE_URL points at a server of their own (Ollama, vLLM, llama.cpp, LM Studio) may name a
model it does not serve: the first call fails. `inquire` asks each such endpoint which names it serves
(`GET /models`) and says, per role and member, whether the name given is among them. llama.cpp's server lists the
one model it loaded but answers whatever name is asked for (its listing says `owned_by: llamacpp`): no warning
there. With `probe`, one small call per endpoint tells whether the model's tool calls come back native or written
as text (which `tool_calls = auto` reads; see `llm.text_calls`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import anyio

from mcp_team.llm.text_calls import read_calls, reads_text_calls
from mcp_team.llm.types import Message, Model, ModelError, ModelRequest, ToolDefinition

ANY_NAME_OWNERS = {"llamacpp"}  # servers that answer any model name, by the `owned_by` of their listing

_ADD = ToolDefinition(
    name="add",
    description="Add two numbers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
_PROBE = ModelRequest(
    system="You can call tools. Use the add tool for any sum.",
    messages=[Message(role="user", content="What is 17 + 25? Use the add tool.")],
    tools=[_ADD],
    max_tokens=200,
    member="probe",
)


@dataclass
class Endpoint:
    """One OpenAI-compatible server of the team, the names asked of it, and what it said."""

    url: str
    model: Model  # one of its models, to ask with
    names: dict[str, list[str]] = field(default_factory=dict)  # model name -> who uses it (`the supervisor`)
    served: list[str] | None = None  # what it lists; None: not asked, or it could not be asked
    any_name: bool = False
    error: str | None = None
    probe: str | None = None  # what the probe found, in words

    def missing(self) -> list[str]:
        """The names asked of it that it does not serve (none when it serves any name, or could not be asked)."""
        if self.served is None or self.any_name:
            return []
        return [name for name in self.names if name not in self.served]

    def lines(self) -> list[str]:
        """What `check` prints of it."""
        if self.error is not None:
            out = [f"server at {self.url}: could not ask which models it serves ({self.error})"]
        else:
            listed = ", ".join(self.served or []) or "none"
            extra = " (llama.cpp: it answers any model name)" if self.any_name else ""
            out = [f"server at {self.url}: serves {listed}{extra}"]
        if self.probe is not None:
            out.append(f"    tool calls: {self.probe}")
        return out

    def warnings(self) -> list[str]:
        """The names it does not serve, each with the one setting that fixes it."""
        out = []
        for name in self.missing():
            who = " and ".join(self.names[name])
            pick = (self.served or ["NAME"])[0]
            out.append(
                f"the server at {self.url} does not serve {name!r}, the model of {who} (it serves: "
                f"{', '.join(self.served or []) or 'nothing'}), so its first call would fail; name a model it "
                f"serves: --model openai:{pick} (or MCP_TEAM_MODEL=openai:{pick})"
            )
        return out


def endpoints(members: Iterable[tuple[str, Model]]) -> list[Endpoint]:
    """The OpenAI-compatible servers other than OpenAI's own API among `(who, model)` pairs, each once."""
    found: dict[str, Endpoint] = {}
    for who, model in members:
        url = getattr(model, "base_url", None)
        if model.provider != "openai" or not url or not hasattr(model, "list_models"):
            continue  # not such a server, or a replay of one (it has no server to ask)
        endpoint = found.setdefault(str(url), Endpoint(str(url), model))
        endpoint.names.setdefault(model.name, []).append(who)
    return list(found.values())


async def inquire(found: list[Endpoint], *, probe: bool = False) -> list[Endpoint]:
    """Ask each endpoint which models it serves (and, with `probe`, make one small call); concurrently."""

    async def one(endpoint: Endpoint) -> None:
        try:
            listed = await endpoint.model.list_models()  # type: ignore[attr-defined]  # an OpenAIModel's
        except ModelError as exc:
            endpoint.error = exc.message
        else:
            endpoint.served = [name for name, _owner in listed]
            endpoint.any_name = any(owner in ANY_NAME_OWNERS for _name, owner in listed)
        if probe:
            endpoint.probe = await _probe(endpoint.model)

    # `check` and `run` ask in an `anyio.run` of its own: the run's calls, in another loop, make their own
    # connections (`SdkModel._client_of_this_loop`).
    async with anyio.create_task_group() as tg:
        for endpoint in found:
            tg.start_soon(one, endpoint)
    return found


async def _probe(model: Model) -> str:
    """Whether `model`'s tool calls come back native, in words (and what mcp-team makes of text calls)."""
    try:
        response = await model.complete(_PROBE)
    except ModelError as exc:
        return f"the test call of {model.name} failed: {exc.message}"
    if response.tool_uses:
        return f"{model.name} returns native tool calls"
    text = read_calls(response.text, [_ADD])
    said = " ".join(response.text.split())[:120]
    if text.runnable:
        reads = "mcp-team reads and runs them (tool_calls = auto)" if reads_text_calls(model) else (
            "tool_calls = native leaves them unread: set tool_calls = \"text\" (MCP_TEAM_TOOL_CALLS=text)"
        )  # fmt: skip
        return f"{model.name} writes its tool calls as text, not native ones ({said!r}); {reads}"
    return f"{model.name} made no tool call when asked to (it said {said!r}): it may not follow tool calling"
