"""The types the run lifecycle shares: a run's record (`RunRecord`), what a caller asks for (`RunRequest`: the one
definition of a run's arguments, for `run_team`, `start_run`, tasks and the command line), what a run workflow is
given (`RunInput`), and what runs it (`Engine`). Light on purpose: no DBOS, no SQLAlchemy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mcp_team.handoffs import Budgets, RunEvent, RunResult, Runtime
from mcp_team.handoffs.checkpoints import Approver, Checkpoint
from mcp_team.handoffs.schema import Mode
from mcp_team.runs.threads import ThreadHistory
from mcp_team.telemetry.content import redact_value

RunState = Literal["running", "complete", "partial", "failed", "cancelled", "interrupted"]
FINISHED: frozenset[str] = frozenset({"complete", "partial", "failed", "cancelled", "interrupted"})


class Resumed(BaseModel, defer_build=True):
    """A time a run came back after the process running it stopped."""

    at: datetime
    by: str = Field(description="The executor id of the process that resumed it.")
    how: Literal["restart", "takeover"] = Field(
        description="restart: the process came back with its executor id; takeover: another process took it over."
    )


class RunRecord(BaseModel):
    """What the store knows of a run: its state and the run record so far (the result once finished)."""

    # Records are read back from JSON for every run. pydantic caches the strings it parses (up to 16,384, for
    # good): a record's ids, times and texts would sit in that cache after a burst of runs, scattered over the
    # memory the burst used, and keep it from being returned. Keys are the same for every record: cache those.
    model_config = ConfigDict(defer_build=True, cache_strings="keys")

    run_id: str
    status: RunState
    request: str
    thread: str | None = None
    mode: str | None = None
    executor_id: str
    resumable: bool = Field(description="False for runs that cannot resume after a restart (sampling).")
    workflow_id: str | None = Field(default=None, description="The DBOS workflow running it (changes on a fork).")
    app_version: str = ""
    started_at: datetime
    updated_at: datetime
    reason: str | None = Field(default=None, description="Why it was interrupted or cancelled, in words.")
    owner: str | None = Field(default=None, description="Who started it, when the server checks tokens (MCP Tasks).")
    result: RunResult | None = Field(default=None, description="Handoffs so far; the answer once finished.")
    waiting: Checkpoint | None = Field(
        default=None, description="The checkpoint the run waits at for a person (answer it with answer_checkpoint)."
    )
    resumed: list[Resumed] = Field(default=[], description="Each time it came back after its process stopped.")
    executions: int = Field(default=0, description="How many times a process began running it (1 unless resumed).")

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def view(self) -> dict[str, Any]:
        """The run record clients know (the `RunResult` fields), with the store's status (which may be
        `interrupted`), why it stopped, its thread, and whether it can resume after a restart; secrets redacted."""
        view: dict[str, Any] = self.result.model_dump(mode="json") if self.result is not None else {}
        view.update(
            run_id=self.run_id,
            request=self.request,
            status=self.status,
            reason=self.reason,
            thread=self.thread,
            resumable=self.resumable,
            # the times as the result writes them
            **self.model_dump(mode="json", include={"started_at", "updated_at", "waiting", "resumed"}),
        )
        view.setdefault("handoffs", [])
        return redact_value(view)


class RunRequest(BaseModel):
    """What a caller asks a run for: the request and its options (budgets already merged with the team's)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    request: str
    mode: Mode | None = None
    budgets: Budgets | None = None
    thread: str | None = None
    checkpoints: Sequence[str] = ()  # the call's own, added to the team's


EventSink = Callable[[RunEvent], Awaitable[None]]


class RunInput(BaseModel, defer_build=True):
    run_id: str
    request: str
    mode: Mode | None = None
    budgets: Budgets | None = None
    thread: str | None = None
    history: ThreadHistory = ThreadHistory()
    started_at: datetime
    team_hash: str
    # Set (not stored) when a run starts here after a stop, or off the shared queue: its deadline counts from then
    resumed_at: datetime | None = None
    checkpoints: list[str] = []  # the call's own, added to the team's (issue 13)


class Engine(Protocol):
    """What runs/ needs of the engine; the server builds one from its `Team` (integration round)."""

    @property
    def team_hash(self) -> str:
        """Changes whenever the team (specialists, prompts, tools, settings, models) changes."""
        ...

    async def run(
        self,
        run: RunInput,
        runtime: Runtime | None,
        on_event: EventSink,
        on_finish: Callable[[RunResult], None],
        approve: Approver | None = None,
    ) -> RunResult:
        """Run it (on `runtime`, or ephemerally when None), asking `approve` at its checkpoints. On cancellation,
        `on_finish` gets the cancelled record before the cancellation propagates (as `Team.run` does)."""
        ...


@dataclass(frozen=True)
class Settled:
    """What recovery did with one run: `resumed` here, or its record finished as `status` (with `reason`)."""

    run_id: str
    resumed: bool
    status: str
    reason: str | None = None
    handoffs_done: int = 0  # handoffs the run had finished when its process stopped

    def describe(self) -> str:
        done = f"{self.handoffs_done} handoff(s) done"
        if self.resumed:
            return f"run {self.run_id} resumed ({done})"
        return f"run {self.run_id} {self.status}" + (f": {self.reason}" if self.reason else "")


def now() -> datetime:
    return datetime.now(UTC)
