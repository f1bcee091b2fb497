"""Exact answers to a client's mistakes: unknown tools, prompts and resources, unknown or missing arguments.

The SDK answers some of these vaguely or wrongly (an unknown prompt or a missing prompt argument is a
`ValueError` the dispatcher turns into code 0 or -32603 with a traceback in the log; an unknown tool is an
`isError` result; unknown tool arguments are dropped without a word; a missing resource is -32602 on every
revision). Here each is answered as the spec says, with a message that names the thing and lists what exists:

- `tools/call`: an unknown tool is a protocol error (-32602) listing the tools; unknown arguments are a tool
  error naming them and the accepted ones (a tool error, like the SDK's other argument errors, so a model can
  correct its call), invalid ones a tool error naming each problem, both worded as the SDK words a tool's
  `ToolError` ("Error executing tool NAME: ..."), and every tool's input schema says `additionalProperties: false`;
- `prompts/get`: an unknown prompt, a missing required argument, an unknown or an invalid argument: -32602;
- `resources/read`: a resource that does not exist is -32002 on 2025-11-25 and -32602 from 2026-07-28 on
  (SEP-2164), listing the resources and templates when no URI pattern matched;
- any method whose params do not fit it (`tools/call` with `"name": 5`): -32602 naming each problem, where the
  SDK said "Invalid request parameters" and nothing more (`name_invalid_params`, a middleware: the params are
  validated before any handler runs).

These wrap the SDK's request handlers (`Server.add_request_handler`, the hook the SDK's own extension
interceptor uses) rather than being `ServerMiddleware`: a handler's result still goes through the SDK's
per-revision result shaping, which a middleware that answers by itself would skip.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Protocol, TypeVar

import mcp_types as types
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from pydantic import ValidationError

from mcp_team.errors import message_of
from mcp_team.server.lowlevel import lowlevel_of


class _Named(Protocol):
    @property
    def name(self) -> str: ...


NamedT = TypeVar("NamedT", bound=_Named)

RESOURCE_NOT_FOUND: Final = -32002  # 2025-11-25; retired by 2026-07-28, which uses -32602
MAX_NAME_SHOWN: Final = 200  # characters of a client-sent name echoed in a message


def name_invalid_params() -> ServerMiddleware[Any]:
    """Middleware: params that do not fit their method are -32602 naming what is wrong (at most five problems, as
    `where: what`, never the values sent)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            problems = "; ".join(f"{_loc(e['loc'])}: {message_of(e)}" for e in exc.errors()[:5])
            raise MCPError(types.INVALID_PARAMS, f"invalid params for {ctx.method}: {problems}") from None

    return middleware


def install_strict_requests(server: MCPServer[Any]) -> None:
    """Wrap the `tools/list`, `tools/call`, `prompts/get` and `resources/read` handlers of `server`."""
    lowlevel: Server[Any] = lowlevel_of(server)  # where MCPServer registers its handlers

    def wrap(method: str, make: Any) -> None:
        entry = lowlevel.get_request_handler(method)
        assert entry is not None, f"the SDK registers no {method} handler"
        lowlevel.add_request_handler(method, entry.params_type, make(entry.handler))

    def list_tools(inner: Any) -> Any:
        async def handler(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            result = await inner(ctx, params)
            if isinstance(result, types.ListToolsResult):
                for tool in result.tools:
                    tool.input_schema = {**tool.input_schema, "additionalProperties": False}
            return result

        return handler

    def call_tool(inner: Any) -> Any:
        async def handler(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
            # The tool list is checked in a function of its own: as a local here it stayed alive for the
            # whole call (a run: seconds to minutes), a copy per call in flight.
            refused = _unknown_arguments(params, await server.list_tools())
            if refused is not None:
                return refused
            result = await inner(ctx, params)
            if isinstance(result, types.CallToolResult) and result.is_error:
                return _invalid_arguments(server, params) or result
            return result

        return handler

    def get_prompt(inner: Any) -> Any:
        async def handler(ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams) -> Any:
            prompt = _named("prompt", params.name, await server.list_prompts())
            check_prompt_arguments(prompt, params.arguments or {})
            try:
                return await inner(ctx, params)
            except ValueError as exc:  # the SDK's wrapper of a render failure: invalid arguments are the client's
                cause = exc.__cause__
                if not isinstance(cause, ValidationError):
                    raise
                problems = "; ".join(f"{_loc(e['loc'])}: {message_of(e)}" for e in cause.errors()[:5])
                raise MCPError(
                    types.INVALID_PARAMS, f"invalid argument(s) for prompt {prompt.name}: {problems}"
                ) from None

        return handler

    def read_resource(inner: Any) -> Any:
        async def handler(ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams) -> Any:
            try:
                return await inner(ctx, params)
            except MCPError as exc:
                if exc.code != types.INVALID_PARAMS:  # the SDK's code for ResourceNotFoundError
                    raise
                message = exc.message
                if message.startswith("Unknown resource"):
                    uris = [str(r.uri) for r in await server.list_resources()]
                    uris += [t.uri_template for t in await server.list_resource_templates()]
                    message = f"{message[:300]}; this server's resources are: {_names(uris)}"
                legacy = (ctx.protocol_version or "") < "2026"
                raise MCPError(RESOURCE_NOT_FOUND if legacy else types.INVALID_PARAMS, message, exc.data) from None

        return handler

    wrap("tools/list", list_tools)
    wrap("tools/call", call_tool)
    wrap("prompts/get", get_prompt)
    wrap("resources/read", read_resource)


def check_prompt_arguments(prompt: types.Prompt, arguments: dict[str, Any]) -> None:
    """Raise -32602 naming the missing and unknown arguments of a `prompts/get`, and listing the prompt's."""
    declared = {a.name: a for a in prompt.arguments or []}
    missing = [name for name, a in declared.items() if a.required and name not in arguments]
    unknown = sorted(set(arguments) - set(declared))
    if not missing and not unknown:
        return
    problems = []
    if missing:
        problems.append(f"missing required argument(s) {_names(missing)}")
    if unknown:
        problems.append(f"unknown argument(s) {_names(unknown)}")
    takes = ", ".join(f"{name}{' (required)' if a.required else ''}" for name, a in declared.items()) or "none"
    raise MCPError(types.INVALID_PARAMS, f"prompt {prompt.name}: {'; '.join(problems)}; it takes: {takes}")


def _named(kind: str, name: str, items: Iterable[NamedT]) -> NamedT:
    """The item called `name`, or -32602 naming it and listing the server's items of this kind."""
    by_name = {item.name: item for item in items}
    if name not in by_name:
        raise MCPError(
            types.INVALID_PARAMS, f"unknown {kind} {_shown(name)}; this server's {kind}s are: {_names(sorted(by_name))}"
        )
    return by_name[name]


def tool_error_text(tool: str, message: str) -> str:
    """`message` worded as the SDK words every `ToolError` a tool raises: "Error executing tool X: ...". The errors
    made here and in `task_wire` say it too, so a client (or its model) reads one form whichever made it."""
    return f"Error executing tool {tool}: {message}"


def tool_error(tool: str, message: str) -> types.CallToolResult:
    """The tool error result (`isError`) saying `message`, worded as the SDK's."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=tool_error_text(tool, message))],
                                is_error=True)  # fmt: skip


def unknown_arguments(given: Iterable[str], accepted: Iterable[str]) -> str | None:
    """What is wrong with arguments a tool does not accept (naming them and the accepted ones); None if none."""
    accepted = list(accepted)
    unknown = sorted(set(given) - set(accepted))
    return f"unknown argument(s) {_names(unknown)}; it accepts: {_names(accepted)}" if unknown else None


def invalid_arguments(exc: ValidationError) -> str:
    """What is wrong with a tool's arguments, each problem as `where: what` (at most five, never the values)."""
    return "invalid argument(s): " + "; ".join(f"{_loc(e['loc'])}: {message_of(e)}" for e in exc.errors()[:5])


def _unknown_arguments(params: types.CallToolRequestParams, tools: Iterable[types.Tool]) -> types.CallToolResult | None:
    """The tool error for arguments the called tool does not accept (naming them and the accepted ones)."""
    tool = _named("tool", params.name, tools)
    problem = unknown_arguments(params.arguments or {}, tool.input_schema.get("properties", {}))
    return None if problem is None else tool_error(tool.name, problem)


def _invalid_arguments(server: MCPServer[Any], params: types.CallToolRequestParams) -> types.CallToolResult | None:
    """A failed call's arguments checked again as the SDK checks them: if they are what failed, the tool error
    names each problem (`mode: Input should be 'adaptive' or 'planned'`), where the SDK's quoted pydantic's
    whole report (inputs, types, links) and the name of a generated class."""
    tool = server._tool_manager.get_tool(params.name)
    if tool is None:
        return None
    try:
        tool.fn_metadata.validate_arguments(params.arguments or {})
    except ValidationError as exc:
        return tool_error(tool.name, invalid_arguments(exc))
    return None


def _shown(name: str) -> str:
    return f"'{name[:MAX_NAME_SHOWN]}'"


def _names(names: Iterable[str]) -> str:
    return ", ".join(_shown(n) for n in names) or "none"


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "arguments"
