"""Every span attribute key and span-name prefix mcp-team emits, in one place.

The GenAI semantic conventions are still in Development and the multi-agent parts change often
(see shared/docs/otel-tracing.md); when they move, only this module changes.
"""

from typing import Final

# Operation names (`gen_ai.operation.name`) and span-name prefixes.
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_PLAN: Final = "plan"

# GenAI semantic conventions.
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TRANSFER_MODE: Final = "gen_ai.transfer.mode"
TRANSFER_TARGET_NAME: Final = "gen_ai.transfer.target.name"
ERROR_TYPE: Final = "error.type"

# Opt-in content (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT), as JSON strings.
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"

# mcp-team's own attributes, for what the conventions do not cover yet.
PHASE: Final = "mcp_team.phase"  # act | plan | refine | synthesize | specialist
HANDOFF_ID: Final = "mcp_team.handoff.id"
HANDOFF_ATTEMPT: Final = "mcp_team.handoff.attempt"
HANDOFF_TASK: Final = "mcp_team.handoff.task"  # content: only when capture is on
RUN_MODE: Final = "mcp_team.run.mode"
RUN_STATUS: Final = "mcp_team.run.status"
AGENT_TURNS: Final = "mcp_team.agent.turns"
USAGE_COST_USD: Final = "mcp_team.usage.cost_usd"  # from genai-prices; absent when the price is unknown
# On a call whose reply wrote its tool calls as text, read and run as calls (llm/text_calls.py): their tools' names.
TEXT_TOOL_CALLS: Final = "mcp_team.tool_calls.from_text"
FALLBACK_MODEL: Final = "mcp_team.fallback"  # on a call or handoff a fallback took over: which, for what, why
# On a span of a run's trace file whose parent is not in the file (the run's root under the MCP SDK's
# `tools/call` span, itself under the client's span): that parent's id, so the file has no dangling reference.
PARENT_SPAN_ID: Final = "mcp_team.parent_span_id"
