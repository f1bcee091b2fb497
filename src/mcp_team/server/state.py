"""What the server holds for its lifetime (`ServerState`) and how a call gets a model.

`ServerState` is the lifespan context that every tool, prompt, resource and middleware reads: the model
settings, the current team and its external MCP servers, the run service, and the 2025-era sessions
to tell when the team changes.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, PromptsListChanged, ServerEvent, ToolsListChanged
from mcp_types import InputRequiredResult

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.building import build_models
from mcp_team.llm.limits import SharedRate
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.auth import Caller, caller
from mcp_team.server.client_features.elicitation import elicit_in_rounds
from mcp_team.server.client_features.sampling import (
    CtxGetter,
    RoundRunner,
    SamplingModel,
    can_sample_in_rounds,
    can_sample_now,
)
from mcp_team.server.runs import ServerEngine, ServerRuns
from mcp_team.server.surface.limits import RunSlots, ServerLimits
from mcp_team.specialists import Specialist
from mcp_team.specialists.mcp_config import McpServerConfig
from mcp_team.specialists.mcp_tools import McpToolPool
from mcp_team.teamfile.loading import TeamSpec

T = TypeVar("T")
log = logging.getLogger("mcp_team.server")


class ListenedBus(InMemorySubscriptionBus):
    """The SDK's bus, knowing whose each `subscriptions/listen` stream is: an event only some principals may see
    (`publish_to`) reaches their streams alone, and the run changes of other processes are polled for only while
    a stream is open (`listeners`, see `run_updates.follow_other_replicas`)."""

    def __init__(self) -> None:
        super().__init__()
        self._streams: dict[object, tuple[Callable[[ServerEvent], None], Caller]] = {}  # listener, whose

    @property
    def listeners(self) -> int:
        return len(self._streams)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        # The SDK's listen handler subscribes from the listen request itself, where the caller's token is in
        # context (as the middleware `listing_updates.follow_listen_streams` sees it): the stream is that principal's.
        who = caller()
        unsubscribe = super().subscribe(listener)
        key = object()
        self._streams[key] = (listener, who)

        def once() -> None:
            self._streams.pop(key, None)
            unsubscribe()

        return once

    async def publish_to(self, event: ServerEvent, sees: Callable[[Caller], bool]) -> None:
        """Deliver `event` to the streams of the principals `sees` admits, as `publish` does to all (each
        stream's own filter still decides whether it asked for the event)."""
        for listener, who in list(self._streams.values()):
            if sees(who):
                try:
                    listener(event)
                except Exception:  # one stream's listener must not starve the others (as `publish`)
                    log.exception("subscription listener raised; continuing")
        await anyio.lowlevel.checkpoint()  # let the streams drain between events (as `publish`)


@dataclass
class ServerState:
    """What the server holds for its lifetime: settings, the current team, the model (built lazily), the
    external MCP servers, the run service, and the client sessions to tell when the team changes."""

    model_settings: ModelSettings
    team: TeamSpec
    runs: ServerRuns = field(default_factory=lambda: ServerRuns(None))
    bus: ListenedBus = field(default_factory=lambda: ListenedBus())
    rounds: RoundRunner = field(default_factory=RoundRunner)
    pool: McpToolPool | None = None
    specialists: tuple[Specialist, ...] = ()
    run_settings: RunSettings = field(default_factory=RunSettings)
    sessions: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    registered: list[str] = field(default_factory=list)  # the per-specialist tool and prompt names on the server
    limits: ServerLimits = field(default_factory=ServerLimits)
    slots: RunSlots = field(default_factory=RunSlots)
    base_settings: ModelSettings | None = None  # the settings before the team file's [models]: a reload applies its own
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)  # the variables members name (api_key_env)
    engine: ServerEngine = field(init=False)
    _models: ModelSet | None = None
    _shared_rate: SharedRate | None = None  # the replicas' request rate, on every model set built (see share_rate)
    _pool_stop: anyio.Event | None = None

    def __post_init__(self) -> None:
        self.engine = ServerEngine(self)

    async def load(self, team: TeamSpec, task_group: TaskGroup) -> None:
        """Make `team` current: (re)start its MCP servers if they changed and build its specialists. On a
        `ConfigError` the current team and its servers stay."""
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
        if (team.model_overrides, team.member_models) != (self.team.model_overrides, self.team.member_models):
            # An edit of the team's models ([models], a member's own model, key variable or fallback) is built on
            # the next call, as the first team's were; a run in flight keeps the models it started on.
            self.model_settings = (self.base_settings or self.model_settings).model_copy(update=team.model_overrides)
            self._models = None
        self.team, self.specialists, self.run_settings = team, specialists, team.run_settings

    def close_pool(self) -> None:
        if self._pool_stop is not None:
            self._pool_stop.set()

    def keep_run(self, run: RunResult, owner: str | None) -> None:
        """Record a run that ran outside the run service (a specialist's own tool call) in it, once it is open."""
        self.runs.keep(run, owner)

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
        """The server's own model (built on first use, off the initialize path), if one is configured and can be
        built; None otherwise. Never raises: the run service asks for it from a task of the server's own, where an
        error would end the whole server. A call asks `own_models`, which says what is misconfigured."""
        try:
            return self.own_models()
        except ToolError:
            return None

    def own_models(self) -> ModelSet | None:
        """The server's own model, or None when it runs on the client's (sampling). `ToolError` naming the problem
        when the configuration cannot make one (say, a specialist's API key variable unset in the client's env):
        the server still starts and answers, so the client can show its user what to fix."""
        settings = self.model_settings
        if settings.configured_backend() in (None, "sampling"):
            return None
        if self._models is None:
            try:
                models = build_models(settings, self.team.member_models, environ=self.environ)
            except ConfigError as exc:
                raise ToolError(f"mcp-team is misconfigured: {exc}") from None
            if self._shared_rate is not None and models.limits is not None:
                models.limits.share(self._shared_rate)
            self._models = models
        return self._models

    def share_rate(self, rate: SharedRate) -> None:
        """Count requests per minute with every replica through `rate`: the models built now and those a team
        file's edit (`--watch`) or a mended configuration builds later."""
        self._shared_rate = rate
        if self._models is not None and self._models.limits is not None:
            self._models.limits.share(rate)

    async def execute(
        self, ctx: Context[Any, Any], work: Callable[[Team, CtxGetter], Awaitable[T]], *, asks: bool = False
    ) -> T | InputRequiredResult:
        """Run `work` on the configured model, or on the client's model through sampling. `asks`: the work may
        ask the client for input (checkpoints), so on 2026-07-28 it is parked between rounds."""

        specialists, run_settings = self.specialists, self.run_settings  # a reload mid-call must not mix teams
        work = self.slots.guarded(work, self.limits.max_runs)  # busy beyond MCP_TEAM_MAX_RUNS

        def team(models: ModelSet) -> Team:
            return Team(models, specialists, run_settings)

        models = self.own_models()
        if models is not None:
            if asks and elicit_in_rounds(ctx):
                return await self.rounds.run(
                    ctx, self.model_settings.max_concurrency, lambda m, get_ctx: work(team(m), get_ctx), models
                )
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


def state_of(ctx: Context[Any, Any]) -> ServerState:
    """The server's state, from a tool's or prompt's context."""
    state: ServerState = ctx.request_context.lifespan_context
    return state


async def _run_pool(
    configs: list[McpServerConfig], *, task_status: TaskStatus[tuple[McpToolPool, anyio.Event]]
) -> None:
    stop = anyio.Event()
    async with McpToolPool(configs) as pool:
        task_status.started((pool, stop))
        await stop.wait()
