"""The server's run service (runs/service.py): opened in the background for the server's lifetime, and the engine
its runs run on.

Every tool, task, resource and page that starts, follows, cancels or answers a run gets the service here
(`ServerRuns.get`). A durable server's service (and DBOS with it) is opened once the server has answered its first
request, so `initialize` never waits for it nor shares the CPU with it (a stdio server always has a client that
sends one); an HTTP server, which may have no client for a while, also opens it `open_delay` seconds after it
starts, so it resumes its runs on its own. An ephemeral server's service (`--ephemeral`: runs in memory) opens at
once. Nothing here imports DBOS.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunResult, Team
from mcp_team.handoffs.checkpoints import Approver
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.health import Liveness, described
from mcp_team.runs.types import EventSink, RunInput

if TYPE_CHECKING:
    from mcp_team.handoffs import RunSettings
    from mcp_team.llm import ModelSet
    from mcp_team.llm.limits import SharedRate
    from mcp_team.runs.service import Runs
    from mcp_team.runs.team_engine import TeamEngine
    from mcp_team.specialists import Specialist

OPEN_DELAY = 1.0  # seconds: an HTTP server that no client talks to still resumes its runs soon after start
NO_MODEL = "no-configured-model"  # the team hash when the server has no model of its own: nothing resumes on it

log = logging.getLogger("mcp_team.server")


class ServedTeam(Protocol):
    """What the run service needs of the server (`ServerState`): its current team and model."""

    @property
    def specialists(self) -> tuple[Specialist, ...]: ...

    @property
    def run_settings(self) -> RunSettings: ...

    def configured_models(self) -> ModelSet | None: ...

    def share_rate(self, rate: SharedRate) -> None: ...


# Told once the service is open: the service, and a task group that lives as long as it is open.
OnOpen = Callable[["Runs", anyio.abc.TaskGroup], None]


@dataclass
class ServerRuns:
    """The run service of a server: durable on `config`'s database, or in memory when `config` is None."""

    config: DurableConfig | None
    open_delay: float | None = None  # None: a durable one waits for the first request (stdio)
    service: Runs | None = None
    error: str | None = None
    asked_to_stop: anyio.Event | None = None  # set by `stopping` (made with the other events, in the loop)
    on_open: Callable[[Runs], None] | None = None  # told once the service is open (serve: what it resumed)
    follow: OnOpen | None = None  # set by the server: publishes the runs' updates to subscribers
    _wanted: anyio.Event | None = None
    _ready: anyio.Event | None = None
    _stop: anyio.Event | None = None
    _stopping: bool = False
    _unkept: list[tuple[RunResult, str | None]] = field(default_factory=list)  # kept before it opened, owners
    liveness: Liveness = field(default_factory=Liveness)  # told when the service dies (runs/health.py)
    refusing: str | None = None  # why no run is taken any more (the runs database deleted, replaced, damaged)

    @property
    def durable(self) -> bool:
        return self.config is not None

    def start(self, tg: anyio.abc.TaskGroup, state: ServedTeam) -> None:
        self._wanted, self._ready, self._stop = anyio.Event(), anyio.Event(), anyio.Event()
        self.asked_to_stop = anyio.Event()
        if self.config is None:
            self._wanted.set()  # in memory: nothing to wait for
        tg.start_soon(self._serve, state, tg)

    def want(self) -> None:
        """Open now (the server has answered a request, or a tool needs the service)."""
        if self._wanted is not None:
            self._wanted.set()

    def stopping(self) -> None:
        """The process was asked to stop (SIGTERM, Ctrl-C): the calls the stop cancels leave their durable runs to
        resume at the next start, as a crash would. Only a client's cancel cancels a run."""
        self._stopping = True
        if self.asked_to_stop is not None:
            self.asked_to_stop.set()
        if self.service is not None:
            self.service.stopping = True

    def keep(self, result: RunResult, owner: str | None) -> None:
        """Record a run that ran outside the service (a specialist's own tool call): at once, or once it opens."""
        if self.service is not None:
            self.service.keep(result, owner)
        else:
            self._unkept.append((result, owner))

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self.want()  # wakes a service that never opened (a stdio client gone before its first request)

    @property
    def stopped(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    async def get(self) -> Runs:
        """The open service; `ToolError` saying why it is unavailable."""
        assert self._ready is not None, "the server's lifespan has not started"
        if self.refusing is not None:
            raise ToolError(f"this server takes no more runs: {self.refusing}; it is stopping")
        self.want()
        await self._ready.wait()
        if self.service is None:
            raise ToolError(f"durable runs are unavailable on this server: {self.error or 'it is shutting down'}")
        return self.service

    async def _serve(self, state: ServedTeam, tg: anyio.abc.TaskGroup) -> None:
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
                runs.store.on_failure = self._write_failed
                if self.follow is not None:
                    self.follow(runs, inner)
                if self.config is not None and self.config.sqlite_path is not None:
                    from mcp_team.runs.watch_db import watch_database

                    inner.start_soon(watch_database, self.config.sqlite_path, self._broken)
                self.service = runs
                runs.stopping = self._stopping
                if runs.durable is not None and runs.durable.replicas is not None:
                    state.share_rate(runs.durable.replicas.rate)  # requests per minute counted by every replica
                for result, owner in self._unkept:
                    runs.keep(result, owner)
                self._unkept.clear()
                if self.on_open is not None:
                    self.on_open(runs)
                self._ready.set()
                await self._stop.wait()
                self.service = None
                inner.cancel_scope.cancel()
        except ConfigError as exc:
            # Bad input at start-up (an unusable state directory or database). The server goes on: every call
            # that needs its runs gets this error (see `get`), which the client shows its user, and
            # `mcp-team serve` says it again as it exits with a usage error. Stopping the server instead left a
            # stdio client's pending call unanswered: the stdin reader holds the process until the next line.
            self.error = str(exc)
            log.error("durable runs are unavailable: %s", exc)
        except Exception as exc:  # the service died while serving (a database error no wait fixes): say it, stop
            self.error = f"the run service failed: {described(exc)}"
            self.liveness.fail(self.error)
        finally:
            self.service = None
            self._ready.set()

    def _write_failed(self, exc: Exception) -> None:
        """The run store could not write, for a reason no wait fixes: what it has is kept in memory only, and
        more would be lost; stop (exit 1), saying why."""
        self.liveness.fail(f"the runs database refused a write: {described(exc)}")

    def _broken(self, why: str) -> None:
        """The runs database is gone or damaged under the server: take no more runs, and stop (exit 1)."""
        self.refusing = why
        self.liveness.fail(f"{why}; runs started now would be lost")


class ServerEngine:
    """The run service's engine: the server's current team on its configured model. A run resumed after a
    restart runs on it only if its team hash is the one the run started with (else it is interrupted)."""

    def __init__(self, state: ServedTeam) -> None:
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
        self,
        run: RunInput,
        runtime: Any,
        on_event: EventSink,
        on_finish: Callable[[RunResult], None],
        approve: Approver | None = None,
    ) -> RunResult:
        engine = self.current()
        if engine is None:
            raise ConfigError("this server has no model of its own to resume the run on")
        return await engine.run(run, runtime, on_event, on_finish, approve)
