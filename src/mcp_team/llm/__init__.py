"""Model backends behind one small async interface (`Model.complete`)."""

from mcp_team.llm.call import PLANNER, SPECIALIST, SUPERVISOR, Meter, ModelSet, chat
from mcp_team.llm.types import (
    ContentBlock,
    Message,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

__all__ = [
    "PLANNER",
    "SPECIALIST",
    "SUPERVISOR",
    "ContentBlock",
    "Message",
    "Meter",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSet",
    "TextBlock",
    "ToolDefinition",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "chat",
]
