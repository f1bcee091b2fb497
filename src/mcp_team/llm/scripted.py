"""A model that replays an explicit list of responses, for exact tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mcp_team.llm.types import ModelError, ModelRequest, ModelResponse, TextBlock, ToolUseBlock, Usage

Step = ModelResponse | ModelError | Callable[[ModelRequest], ModelResponse]


def text(answer: str, *, input_tokens: int = 10, output_tokens: int = 5) -> ModelResponse:
    """A final text response."""
    return ModelResponse(
        content=[TextBlock(text=answer)],
        stop_reason="end_turn",
        model="scripted",
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
    )


def tool_calls(*calls: tuple[str, dict[str, object]], prefix: str = "call") -> ModelResponse:
    """A response that calls the given tools, in order."""
    blocks = [ToolUseBlock(id=f"{prefix}_{i}", name=name, input=dict(args)) for i, (name, args) in enumerate(calls)]
    return ModelResponse(
        content=list(blocks), stop_reason="tool_use", model="scripted", usage=Usage(input_tokens=10, output_tokens=5)
    )


class ScriptedModel:
    """Returns (or raises) the scripted steps in order; records every request it saw.

    A step may be a function of the request, for responses that depend on what was asked.
    Running out of steps is a test bug and fails loudly.
    """

    provider = "scripted"

    def __init__(self, steps: Sequence[Step], name: str = "scripted") -> None:
        self._steps = list(steps)
        self.name = name
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if not self._steps:
            raise AssertionError(f"ScriptedModel {self.name!r} ran out of steps at call {len(self.requests)}")
        step = self._steps.pop(0)
        if isinstance(step, ModelError):
            raise step
        return step(request) if callable(step) else step
