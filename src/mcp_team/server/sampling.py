"""The sampling backend: the team runs on the MCP client's own model through `sampling/createMessage`.

Used when the server has no model configured and the client supports sampling with tools, on
connections with a back-channel (2025-11-25 over stdio or stateful HTTP). Every request is sent
with `related_request_id` so the client ties it to the tool call it belongs to.
"""

from __future__ import annotations

import warnings
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver import Context

from mcp_team.llm.types import (
    ContentBlock,
    ModelError,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

_STOP: dict[str, StopReason] = {
    "endTurn": "end_turn",
    "toolUse": "tool_use",
    "maxTokens": "max_tokens",
    "stopSequence": "stop_sequence",
}


def client_can_sample(ctx: Context[Any, Any]) -> bool:
    """True when this call can ask the client's model: sampling with tools over a back-channel."""
    caps = ctx.client_capabilities
    has_tools = caps is not None and caps.sampling is not None and caps.sampling.tools is not None
    return has_tools and ctx.session.can_send_request


class SamplingModel:
    """A `Model` that forwards every call to the client of one MCP request."""

    provider = "mcp_sampling"
    name = "client-model"

    def __init__(self, ctx: Context[Any, Any]) -> None:
        self._ctx = ctx

    async def complete(self, request: ModelRequest) -> ModelResponse:
        messages = [
            types.SamplingMessage(role=m.role, content=[_to_wire(b) for b in m.blocks]) for m in request.messages
        ]
        tools = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in request.tools]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sampling is deprecated in 2026-07-28; we use it on 2025-11-25
                result = await self._ctx.session.create_message(
                    messages,
                    max_tokens=request.max_tokens,
                    system_prompt=request.system,
                    tools=tools or None,
                    tool_choice=types.ToolChoice(mode="auto"),
                    related_request_id=self._ctx.request_id,
                )
        except MCPError as exc:
            raise ModelError("unavailable", f"the client's model refused the sampling request: {exc}") from None
        content: list[TextBlock | ToolUseBlock] = []
        for block in result.content_as_list:
            if isinstance(block, types.TextContent):
                content.append(TextBlock(text=block.text))
            elif isinstance(block, types.ToolUseContent):
                content.append(ToolUseBlock(id=block.id, name=block.name, input=dict(block.input)))
        default: StopReason = "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"
        stop = _STOP.get(result.stop_reason or "", default)
        return ModelResponse(
            content=content,
            stop_reason=stop,
            model=result.model or self.name,
            usage=Usage(),
        )


def _to_wire(block: ContentBlock) -> types.SamplingMessageContentBlock:
    if isinstance(block, TextBlock):
        return types.TextContent(type="text", text=block.text)
    if isinstance(block, ToolUseBlock):
        return types.ToolUseContent(type="tool_use", id=block.id, name=block.name, input=block.input)
    assert isinstance(block, ToolResultBlock)
    return types.ToolResultContent(
        type="tool_result",
        tool_use_id=block.tool_use_id,
        is_error=block.is_error,
        content=[types.TextContent(type="text", text=block.content)],
    )
