"""The MCP surface: the team as tools, prompts and resources on one `MCPServer`.

Tools: `run_team`, `plan_team`, and one tool per specialist. Prompts: `supervisor` and one per
specialist. Resources: `team://specialists`, `team://runs` and `team://runs/{run_id}`.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime to build
the tools' JSON schemas.
"""

import logging
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ToolsListChanged
from mcp_types import InputRequiredResult, ToolAnnotations
from pydantic import Field

from mcp_team import __version__
from mcp_team.handoffs import Budgets, Plan, PlanError, RunEvent, RunResult, RunSettings, Team
from mcp_team.handoffs.prompts import SUPERVISOR_INSTRUCTIONS, describe_team
from mcp_team.llm import ModelSet
from mcp_team.llm.settings import ConfigError, ModelSettings, build_models
from mcp_team.server.sampling import CtxGetter, RoundRunner, SamplingModel, can_sample_in_rounds, can_sample_now
from mcp_team.server.store import MemoryRunStore, RunStore
from mcp_team.server.teamfile import TeamSpec, load_team, load_team_file
from mcp_team.specialists import Specialist, SpecialistResult, handoff_message
from mcp_team.specialists.mcp_tools import McpServerConfig, McpToolPool
from mcp_team.telemetry.content import redact_value, register_secret
from mcp_team.telemetry.setup import Tracing

log = logging.getLogger("mcp_team.server")
T = TypeVar("T")

INSTRUCTIONS = """\
mcp-team puts a team of specialists ({names}) and a supervisor behind these tools.
- run_team: for a request that needs several kinds of work (e.g. research, then analysis, then writing and
  review). The supervisor delegates, runs independent work in parallel, retries failures and returns one
  answer with status complete, partial (saying what is missing) or failed. It can take minutes; progress is
  reported as handoffs start and finish.
- a specialist's own tool ({names}): for one focused task that needs only that skill; faster and cheaper.
- plan_team: to preview how the team would split a request, without running it.
Run records (every handoff with its payload and result) are resources at team://runs/{{run_id}}."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


@dataclass
class ServerState:
    """What the server holds for its lifetime: settings, the current team, the model (built lazily), the
    external MCP servers, run records, and the client sessions to tell when the team changes."""

    model_settings: ModelSettings
    team: TeamSpec
    store: RunStore = field(default_factory=MemoryRunStore)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    rounds: RoundRunner = field(default_factory=RoundRunner)
    pool: McpToolPool | None = None
    specialists: tuple[Specialist, ...] = ()
    run_settings: RunSettings = field(default_factory=RunSettings)
    sessions: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    registered: list[str] = field(default_factory=list)
    _models: ModelSet | None = None
    _pool_stop: anyio.Event | None = None

    async def load(self, server: MCPServer["ServerState"], team: TeamSpec, task_group: TaskGroup) -> None:
        """Make `team` current: (re)start its MCP servers if they changed, then register its specialists."""
        pool, stop = self.pool, self._pool_stop
        fresh = stop is None or team.mcp_servers != self.team.mcp_servers
        if fresh:
            pool, stop = None, anyio.Event()
            if team.mcp_servers:
                # Each pool lives in a task of its own: its sessions must be entered and left in one task.
                pool, stop = await task_group.start(_run_pool, team.mcp_servers)
        try:
            specialists = team.build(pool)
        except ConfigError:
            if fresh and stop is not None:
                stop.set()  # keep the current team and its servers
            raise
        if fresh and self._pool_stop is not None:
            self._pool_stop.set()
        self.pool, self._pool_stop = pool, stop
        self.team, self.specialists, self.run_settings = team, specialists, team.run_settings
        _register_specialists(server, self)

    def close_pool(self) -> None:
        if self._pool_stop is not None:
            self._pool_stop.set()

    def save_run(self, run: RunResult) -> None:
        """Keep a run's record, with any secret that slipped into its text redacted."""
        self.store.save(RunResult.model_validate(redact_value(run.model_dump(mode="json"))))

    async def announce_change(self) -> None:
        """Tell clients the tool and prompt lists changed: 2025 sessions by notification, 2026 by the bus."""
        await self.bus.publish(ToolsListChanged())
        await self.bus.publish(PromptsListChanged())
        for session in list(self.sessions):
            try:
                await session.send_tool_list_changed()
                await session.send_prompt_list_changed()
            except Exception:  # a connection that went away since
                self.sessions.discard(session)

    def configured_models(self) -> ModelSet | None:
        """The server's own model (built on first use, off the initialize path), if one is configured."""
        settings = self.model_settings
        if settings.configured_backend() in (None, "sampling"):
            return None
        if self._models is None:
            try:
                self._models = build_models(settings)
            except ConfigError as exc:
                raise ToolError(f"mcp-team is misconfigured: {exc}") from None
        return self._models

    async def execute(
        self, ctx: Context[Any, Any], work: Callable[[Team, CtxGetter], Awaitable[T]]
    ) -> T | InputRequiredResult:
        """Run `work` on the configured model, or on the client's model through sampling."""

        specialists, run_settings = self.specialists, self.run_settings  # a reload mid-call must not mix teams

        def team(models: ModelSet) -> Team:
            return Team(models, specialists, run_settings)

        models = self.configured_models()
        if models is not None:
            return await work(team(models), lambda: ctx)
        if can_sample_now(ctx):
            return await work(
                team(ModelSet.single(SamplingModel(ctx), self.model_settings.max_concurrency)), lambda: ctx
            )
        if can_sample_in_rounds(ctx):
            return await self.rounds.run(
                ctx, self.model_settings.max_concurrency, lambda m, get_ctx: work(team(m), get_ctx)
            )
        raise ToolError(
            "no model is available for this call. Either configure one for the server (set ANTHROPIC_API_KEY, "
            "or MCP_TEAM_MODEL=offline for deterministic offline answers, in the server's env), or call from a client "
            "that supports MCP sampling with tools."
        )


def _state(ctx: Context[Any, Any]) -> ServerState:
    state: ServerState = ctx.request_context.lifespan_context
    return state


def _progress(get_ctx: CtxGetter):  # type: ignore[no-untyped-def]
    last = 0

    async def on_event(event: RunEvent) -> None:
        nonlocal last
        # Progress must grow with every notification: count starts and finishes, out of two per handoff.
        progress = event.started + event.finished
        if progress > last:
            last = progress
            await get_ctx().report_progress(progress, 2 * event.started, event.message)
        if event.kind == "handoff_finished" and event.record is not None and event.record.status != "completed":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # protocol logging is deprecated on 2026-07-28 but still honoured
                await get_ctx().warning(f"{event.record.target} {event.record.status}: {event.record.error}")

    return on_event


async def run_team(
    request: Annotated[str, Field(description="What the team should do, in plain language.", min_length=1)],
    ctx: Context[Any, Any],
    mode: Annotated[
        Literal["adaptive", "planned"] | None,
        Field(description="adaptive (default): the supervisor re-plans after each round; planned: plan first."),
    ] = None,
    max_handoffs: Annotated[int | None, Field(ge=1, description="Cap on handoffs, retries included.")] = None,
    max_model_calls: Annotated[int | None, Field(ge=2, description="Cap on model calls.")] = None,
    max_tokens: Annotated[int | None, Field(ge=1, description="Cap on tokens over all calls.")] = None,
    deadline_seconds: Annotated[float | None, Field(gt=0, description="Wall-clock limit in seconds.")] = None,
) -> RunResult | InputRequiredResult:
    """Run a request through the supervisor and its specialists and return one answer.

    The result lists every handoff, any failures and token usage; `status` is complete, partial (the
    answer says what is missing) or failed."""
    state = _state(ctx)
    if not request.strip():
        raise ToolError("'request' is empty: say what the team should do")
    overrides = {
        "max_handoffs": max_handoffs,
        "max_model_calls": max_model_calls,
        "max_tokens": max_tokens,
        "deadline_seconds": deadline_seconds,
    }
    budgets = None
    if any(v is not None for v in overrides.values()):
        base = state.run_settings.budgets.model_dump()
        budgets = Budgets(**{**base, **{k: v for k, v in overrides.items() if v is not None}})

    async def work(team: Team, get_ctx: CtxGetter) -> RunResult:
        return await team.run(
            request, mode=mode, budgets=budgets, on_event=_progress(get_ctx), on_finish=state.save_run
        )

    result = await state.execute(ctx, work)
    if isinstance(result, InputRequiredResult):
        return result
    if result.status == "failed":
        reasons = "; ".join(f"{f.specialist}: {f.kind}: {f.reason}" for f in result.failures if not f.recovered)
        raise ToolError(
            f"the team could not answer (run {result.run_id}, see team://runs/{result.run_id}). "
            f"{reasons or result.answer}"
        )
    return result


async def plan_team(
    request: Annotated[str, Field(description="The request to plan.", min_length=1)],
    ctx: Context[Any, Any],
) -> Plan | InputRequiredResult:
    """Show the validated plan the team would run for a request (tasks, specialists, dependencies), without
    running it."""
    try:
        return await _state(ctx).execute(ctx, lambda team, _get_ctx: team.plan(request))
    except PlanError as exc:
        raise ToolError(str(exc)) from None


def _specialist_tool(specialist: Specialist):  # type: ignore[no-untyped-def]
    async def call(
        task: Annotated[
            str, Field(description="The task, self-contained: the specialist sees nothing else.", min_length=1)
        ],
        ctx: Context[Any, Any],
        context: Annotated[str, Field(description="Facts or earlier results the task needs.")] = "",
    ) -> SpecialistResult | InputRequiredResult:
        await ctx.report_progress(0, 1, f"{specialist.name}: {task[:100]}")
        result = await _state(ctx).execute(ctx, lambda team, _get_ctx: team.ask(specialist.name, task, context))
        if isinstance(result, InputRequiredResult):
            return result
        await ctx.report_progress(1, 1, f"{specialist.name} {result.status}")
        if result.status == "failed":
            raise ToolError(f"{specialist.name} failed ({result.error_type}): {result.error}")
        return result

    return call


def _supervisor_prompt(state: ServerState):  # type: ignore[no-untyped-def]
    def supervisor(request: Annotated[str, Field(description="The request to orchestrate.")]) -> list[UserMessage]:
        system = SUPERVISOR_INSTRUCTIONS.format(team=describe_team(state.specialists))
        return [
            UserMessage(
                f"{system}\n\nIf your client exposes this server's tools, each specialist is a tool named after "
                f"it.\n\nRequest:\n{request}"
            )
        ]

    return supervisor


def _specialist_prompt(specialist: Specialist):  # type: ignore[no-untyped-def]
    def prompt(
        task: Annotated[str, Field(description="The task for this specialist.")],
        context: Annotated[str, Field(description="Context the task needs.")] = "",
    ) -> list[UserMessage]:
        return [UserMessage(f"{specialist.instructions}\n\n{handoff_message(task, context)}")]

    return prompt


def build_server(
    model_settings: ModelSettings | None = None,
    team: TeamSpec | None = None,
    *,
    store: RunStore | None = None,
    auth: tuple[TokenVerifier, AuthSettings] | None = None,
    watch: bool = False,
    tracing: Tracing | None = None,
) -> MCPServer[ServerState]:
    """The MCP server for a team (by default the one `load_team` finds). Cheap to build: the model is made on
    first use, and external MCP servers start with the server's lifespan. With `watch`, edits to the team file
    reload the team and tell clients that the tool and prompt lists changed. With `tracing`, spans are
    flushed after every tool call (in the background, so an absent collector never delays a reply)."""
    team = team or load_team()
    model_settings = (model_settings or ModelSettings()).model_copy(update=team.model_overrides)
    bus = InMemorySubscriptionBus()
    state = ServerState(model_settings, team, store or MemoryRunStore(), bus=bus)

    @asynccontextmanager
    async def lifespan(server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        # Runs parked between 2026-07-28 sampling rounds, and the team-file watcher, live in this task group.
        async with anyio.create_task_group() as tg:
            state.rounds.task_group = tg
            await state.load(server, state.team, tg)
            watcher = anyio.CancelScope()
            if watch and state.team.path is not None:
                tg.start_soon(_watch, server, state, state.team.path, tg, watcher)
            try:
                yield state
            finally:
                # Let the pool's task close the external servers in order; stop everything else.
                watcher.cancel()
                state.rounds.cancel_all()
                state.close_pool()

    server: MCPServer[ServerState] = MCPServer(
        "mcp-team",
        title="mcp-team",
        version=__version__,
        instructions=INSTRUCTIONS.format(names=", ".join(team.names)),
        lifespan=lifespan,
        token_verifier=auth[0] if auth else None,
        auth=auth[1] if auth else None,
        subscriptions=bus,
        middleware=[_remember_session(state), *([_flush_after_calls(state, tracing)] if tracing else [])],
    )
    _advertise_list_changed(server)
    server.add_tool(run_team, name="run_team", title="Run the team", annotations=_READ_ONLY)
    server.add_tool(
        plan_team,
        name="plan_team",
        title="Plan a request",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    )
    server.add_prompt(
        Prompt.from_function(
            _supervisor_prompt(state),
            name="supervisor",
            description="Play the supervisor: plan and delegate a request.",
        )
    )
    # The specialists' tools and prompts are registered by the lifespan, once their MCP servers are up.

    @server.resource(
        "team://specialists",
        name="specialists",
        mime_type="application/json",
        description="The team: names, descriptions, tools and budgets.",
    )
    def team_resource() -> dict[str, Any]:
        return {
            "source": state.team.source,
            "specialists": [
                {
                    "name": s.name,
                    "description": s.description,
                    "model_role": s.model_role,
                    "tools": [t.name for t in s.tools],
                    "max_turns": s.max_turns,
                    "max_tokens": s.max_tokens,
                }
                for s in state.specialists
            ],
            "budgets": state.run_settings.budgets.model_dump(),
            "mcp_servers": state.pool.status() if state.pool is not None else {},
        }

    @server.resource("team://runs", name="runs", mime_type="application/json", description="Recent runs, newest first.")
    def runs_resource() -> dict[str, Any]:
        return {
            "runs": [
                {
                    "run_id": r.run_id,
                    "status": r.status,
                    "request": r.request[:200],
                    "started_at": r.started_at.isoformat(),
                    "uri": f"team://runs/{r.run_id}",
                }
                for r in state.store.recent()
            ]
        }

    @server.resource(
        "team://runs/{run_id}",
        name="run",
        mime_type="application/json",
        description="A run's record: request, plan, every handoff with payload and result, status, usage, trace id.",
    )
    def run_resource(run_id: str) -> str:
        run = state.store.get(run_id)
        if run is None:
            raise ResourceNotFoundError(
                f"no run '{run_id}' (runs are kept in memory, newest "
                f"{getattr(state.store, 'max_runs', '')} only; see team://runs)"
            )
        return run.model_dump_json(indent=2)

    return server


def _register_specialists(server: MCPServer[ServerState], state: ServerState) -> None:
    """One tool and one prompt per specialist of the current team, replacing the previous team's."""
    for name in state.registered:
        server.remove_tool(name)
        server.remove_prompt(name)
    state.registered = []
    for s in state.specialists:
        server.add_tool(
            _specialist_tool(s),
            name=s.name,
            title=s.name.replace("_", " ").title(),
            description=f"{s.description} Hand it one self-contained task.",
            annotations=_READ_ONLY,
        )
        server.add_prompt(
            Prompt.from_function(_specialist_prompt(s), name=s.name, description=f"Play the {s.name}: {s.description}")
        )
        state.registered.append(s.name)


def _remember_session(state: ServerState):  # type: ignore[no-untyped-def]
    """Middleware that keeps the 2025-era connections, which get list-changed notifications on reload."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if ctx.protocol_version and ctx.protocol_version < "2026":
            # The session object is made per request; its connection is what lives as long as the client
            # and can send on the standalone channel. The SDK exposes it to middleware only privately.
            state.sessions.add(getattr(ctx.session, "_connection", ctx.session))
        return await call_next(ctx)

    return middleware


def _flush_after_calls(state: ServerState, tracing: Tracing):  # type: ignore[no-untyped-def]
    """Middleware: after each tool call, export its spans, so a client closing the server loses none."""
    pending = False

    async def flush() -> None:
        nonlocal pending
        try:
            await anyio.to_thread.run_sync(tracing.flush)
        finally:
            pending = False

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        nonlocal pending
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call" and not pending and state.rounds.task_group is not None:
                pending = True
                state.rounds.task_group.start_soon(flush)

    return middleware


def _advertise_list_changed(server: MCPServer[ServerState]) -> None:
    """Advertise `listChanged` for tools and prompts to 2025-era clients (the SDK's default is off).

    `MCPServer` has no public switch for this; its transports all build their initialization
    options through the low-level server, so that is where the default changes.
    """
    lowlevel = server._lowlevel_server
    create = lowlevel.create_initialization_options

    def with_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kw: Any) -> Any:
        return create(
            notification_options or NotificationOptions(prompts_changed=True, tools_changed=True), *args, **kw
        )

    lowlevel.create_initialization_options = with_list_changed  # type: ignore[method-assign]


WATCH_INTERVAL = 0.5


async def _run_pool(
    configs: list[McpServerConfig], *, task_status: TaskStatus[tuple[McpToolPool, anyio.Event]]
) -> None:
    stop = anyio.Event()
    async with McpToolPool(configs) as pool:
        task_status.started((pool, stop))
        await stop.wait()


async def _watch(
    server: MCPServer[ServerState], state: ServerState, path: Path, task_group: TaskGroup, scope: anyio.CancelScope
) -> None:
    """Reload the team when its file changes; a broken edit keeps the current team and logs why."""
    with scope:
        await _watch_loop(server, state, path, task_group)


async def _watch_loop(server: MCPServer[ServerState], state: ServerState, path: Path, task_group: TaskGroup) -> None:
    last = _mtime(path)
    while True:
        await anyio.sleep(WATCH_INTERVAL)
        current = _mtime(path)
        if current == last:
            continue
        last = current
        try:
            team = load_team_file(path)
        except ConfigError as exc:
            log.error("%s\nkeeping the current team", exc)
            continue
        for secret in team.secrets():
            register_secret(secret)
        try:
            await state.load(server, team, task_group)
        except ConfigError as exc:
            log.error("cannot apply %s: %s; keeping the current team", path, exc)
            continue
        log.warning("reloaded the team from %s: %s", path, ", ".join(s.name for s in state.specialists))
        await state.announce_change()


def _mtime(path: Path) -> tuple[int, int] | None:
    """What tells an edit: modification time and size (a same-tick rewrite still changes one of them
    in practice)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size
