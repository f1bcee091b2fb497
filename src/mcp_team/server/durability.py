"""The server's side of durable runs: opening the run service in the background, the team it resumes runs
with, and running a request through it (as `run_team` does, waiting) or starting one (as `start_run` does).

The service (and DBOS with it) is opened once the server has answered its first request, so `initialize`
never waits for it nor shares the CPU with it (a stdio server always has a client that sends one). An HTTP
server, which may have no client for a while, also opens it `open_delay` seconds after it starts, so it
resumes its runs on its own. Nothing here imports DBOS at module level.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from mcp_team.errors import ConfigError, McpTeamError
from mcp_team.handoffs import Budgets, RunEvent, RunResult, Team
from mcp_team.handoffs.checkpoints import Approver
from mcp_team.handoffs.schema import Mode
from mcp_team.runs.config import DurableConfig

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs
    from mcp_team.runs.team_engine import TeamEngine
    from mcp_team.runs.types import RunInput, RunRecord
    from mcp_team.server.state import ServerState

OPEN_DELAY = 1.0  # seconds: an HTTP server that no client talks to still resumes its runs soon after start
NO_MODEL = "no-configured-model"  # the team hash when the server has no model of its own: nothing resumes on it

log = logging.getLogger("mcp_team.server")
EventSink = Callable[[RunEvent], Awaitable[None]]


@dataclass
class Durability:
    """The run service of a durable server, opened in the background for the server's lifetime."""

    config: DurableConfig
    open_delay: float | None = None  # None: wait for the first request (stdio)
    runs: Runs | None = None
    error: str | None = None
    _wanted: anyio.Event | None = None
    _ready: anyio.Event | None = None
    _stop: anyio.Event | None = None
    _unkept: list[tuple[RunResult, str | None]] = field(default_factory=list)  # recorded before it opened, owners
    _stopping: bool = False
    asked_to_stop: anyio.Event | None = None  # set by `stopping` (made with the other events, in the loop)

    def start(self, tg: anyio.abc.TaskGroup, state: ServerState) -> None:
        self._wanted, self._ready, self._stop = anyio.Event(), anyio.Event(), anyio.Event()
        self.asked_to_stop = anyio.Event()
        tg.start_soon(self._serve, state, tg)

    def want(self) -> None:
        """Open now (the server has answered a request, or a tool needs the service)."""
        if self._wanted is not None:
            self._wanted.set()

    def stopping(self) -> None:
        """The process was asked to stop (SIGTERM, Ctrl-C): the calls the stop cancels leave their runs to resume
        at the next start, as a crash would. Only a client's cancel cancels a run."""
        self._stopping = True
        if self.asked_to_stop is not None:
            self.asked_to_stop.set()
        if self.runs is not None:
            self.runs.stopping = True

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self.want()  # wakes a service that never opened (a stdio client gone before its first request)

    def keep(self, result: RunResult, owner: str | None = None) -> None:
        """Record a run that ran outside the service in the run store (at once, or once the service opens)."""
        if self.runs is not None:
            self.runs.keep(result, owner)
        else:
            self._unkept.append((result, owner))

    async def service(self) -> Runs:
        """The open service; `ToolError` if it could not open."""
        assert self._ready is not None, "the server's lifespan has not started"
        self.want()
        await self._ready.wait()
        if self.runs is None:
            raise ToolError(f"durable runs are unavailable on this server: {self.error or 'it is shutting down'}")
        return self.runs

    async def _serve(self, state: ServerState, tg: anyio.abc.TaskGroup) -> None:
        assert self._wanted is not None and self._ready is not None and self._stop is not None
        with anyio.move_on_after(self.open_delay if self.open_delay is not None else math.inf):
            await self._wanted.wait()
        from mcp_team.runs import open_runs

        try:
            if self._stop.is_set():  # stopped before anything wanted it: nothing to open
                return
            async with (
                open_runs(self.config, ServerEngine(state), adopt_orphans=True) as runs,
                anyio.create_task_group() as inner,
            ):
                from mcp_team.server.run_updates import follow_other_replicas, publish_updates

                runs.store.on_write = publish_updates(state, tg)
                # Runs other processes write (replicas; `mcp-team run` on this state directory) reach this one's
                # listen streams too
                inner.start_soon(follow_other_replicas, state, runs.store)
                self.runs = runs
                runs.stopping = self._stopping
                if runs.replicas is not None:
                    state.share_rate(runs.replicas.rate)  # requests per minute counted by every replica
                for result, owner in self._unkept:
                    runs.keep(result, owner)
                self._unkept.clear()
                self._ready.set()
                await self._stop.wait()
                self.runs = None
                inner.cancel_scope.cancel()
        except ConfigError as exc:
            # Bad input at start-up (an unusable state directory or database). The server goes on: every call
            # that needs durable runs gets this error (see `service`), which the client shows its user, and
            # `mcp-team serve` says it again as it exits with a usage error. Stopping the server instead left a
            # stdio client's pending call unanswered: the stdin reader holds the process until the next line.
            self.error = str(exc)
            log.error("durable runs are unavailable: %s", exc)
        finally:
            self.runs = None
            self._ready.set()


class ServerEngine:
    """The run service's engine: the server's current team on its configured model. A run resumed after a
    restart runs on it only if its team hash is the one the run started with (else it is interrupted)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._key: tuple[Any, ...] | None = None
        self._engine: TeamEngine | None = None

    def current(self) -> TeamEngine | None:
        try:
            models = self.state.configured_models()
        except ToolError:
            return None
        if models is None:
            return None
        return self.engine_for(Team(models, self.state.specialists, self.state.run_settings))

    def engine_for(self, team: Team) -> TeamEngine:
        """The engine for `team`, kept while the team is the same (a hash and wrapped models per call is waste)."""
        from mcp_team.runs.team_engine import TeamEngine

        key = (id(team.models), tuple(id(s) for s in team.specialists), team.settings.model_dump_json())
        if key != self._key or self._engine is None:
            self._key, self._engine = key, TeamEngine(team)
        return self._engine

    @property
    def team_hash(self) -> str:
        engine = self.current()
        return engine.team_hash if engine is not None else NO_MODEL

    async def run(
        self, run: RunInput, runtime: Any, on_event: EventSink, on_finish: Callable[[RunResult], None]
    ) -> RunResult:
        engine = self.current()
        if engine is None:
            raise ConfigError("this server has no model of its own to resume the run on")
        return await engine.run(run, runtime, on_event, on_finish)


@dataclass
class RunRequest:
    """What a client asked for: the request and its options."""

    request: str
    mode: Mode | None = None
    budgets: Budgets | None = None
    thread: str | None = None
    checkpoints: tuple[str, ...] = ()  # the call's own, added to the team's


async def start_run(
    runs: Runs,
    engine: ServerEngine,
    team: Team,
    asked: RunRequest,
    *,
    resumable: bool,
    on_event: EventSink | None,
    approve: Approver | None = None,
    owner: str | None = None,
) -> RunRecord:
    """Start a run in the background and return its record at once (bound to `owner`, the caller's principal
    when the server checks tokens). `ToolError` when it could not be started (the run store refused it)."""
    try:
        return await runs.start(
            asked.request,
            mode=asked.mode,
            budgets=asked.budgets,
            thread=asked.thread,
            on_event=on_event,
            engine=engine.engine_for(team),
            resumable=resumable,
            approve=approve,
            checkpoints=asked.checkpoints,
            owner=owner,
        )
    except McpTeamError as exc:
        raise ToolError(str(exc)) from None


async def run_and_wait(
    runs: Runs,
    engine: ServerEngine,
    team: Team,
    asked: RunRequest,
    *,
    resumable: bool,
    on_event: EventSink | None,
    approve: Approver | None = None,
    owner: str | None = None,
    stop: anyio.Event | None = None,
) -> RunResult:
    """Run it and return its result: a durable run in the service's background, awaited here (cancelled when
    this call is); a non-resumable one (sampling) in this task, recorded in the store. When `stop` is set first
    (the server was asked to stop), `ToolError` naming the run, which goes on when the server starts again."""
    if not resumable:
        record = await runs.run_here(
            asked.request,
            mode=asked.mode,
            budgets=asked.budgets,
            thread=asked.thread,
            on_event=on_event,
            engine=engine.engine_for(team),
            owner=owner,
        )
    else:
        started = await start_run(
            runs, engine, team, asked, resumable=True, on_event=on_event, approve=approve, owner=owner
        )
        try:
            final = await _wait_unless(stop, runs, started.run_id)
        except anyio.get_cancelled_exc_class():
            if not runs.stopping:  # cancelled by its client, not by the server stopping (the run resumes then)
                with anyio.CancelScope(shield=True):
                    await runs.cancel(started.run_id, "cancelled by the client")
            raise
        if final is None:
            raise ToolError(f"run {started.run_id} vanished from the run store")
        record = final
    if record.result is None or record.status == "interrupted":
        raise ToolError(
            f"run {record.run_id} stopped: {record.reason or record.status} (see team://runs/{record.run_id})"
        )
    return record.result


async def _wait_unless(stop: anyio.Event | None, runs: Runs, run_id: str) -> RunRecord | None:
    """The run's final record; `ToolError` as soon as `stop` is set: the caller is told where its run went
    (an HTTP client's held call ended with no answer and no run id when the server stopped)."""
    if stop is None:
        return await runs.wait(run_id)
    final: list[RunRecord | None] = []
    try:
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                final.append(await runs.wait(run_id))
                tg.cancel_scope.cancel()

            tg.start_soon(wait)
            await stop.wait()
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the wait's own error, as it was before this task group wrapped it
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    if final:
        return final[0]
    raise ToolError(
        f"the server is stopping: run {run_id} is kept and goes on when it starts again; follow it then with "
        f"get_run (run_id {run_id}) or team://runs/{run_id}"
    )
