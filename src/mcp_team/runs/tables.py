"""The runs database's own tables (next to DBOS's) and the record a run is stored as (`RunRecord`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field

from mcp_team.handoffs import RunResult
from mcp_team.handoffs.checkpoints import Checkpoint
from mcp_team.telemetry.content import redact_value

STORE_SCHEMA = 1
"""Version of the tables below. A database whose recorded schema is newer is refused at start-up."""

RunState = Literal["running", "complete", "partial", "failed", "cancelled", "interrupted"]
FINISHED: frozenset[str] = frozenset({"complete", "partial", "failed", "cancelled", "interrupted"})

metadata = sa.MetaData()
meta_table = sa.Table(
    "mcp_team_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
runs_table = sa.Table(
    "mcp_team_runs",
    metadata,
    sa.Column("run_id", sa.String(128), primary_key=True),
    sa.Column("workflow_id", sa.String(160), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("thread_id", sa.String(128), nullable=True),
    sa.Column("executor_id", sa.String(128), nullable=False),
    sa.Column("resumable", sa.Boolean, nullable=False),
    sa.Column("app_version", sa.String(64), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
    sa.Index("mcp_team_runs_started", "started_at"),
    sa.Index("mcp_team_runs_thread", "thread_id", "started_at"),
    sa.Index("mcp_team_runs_executor", "executor_id", "status"),
    # Runs written since a time: polled every second while anyone follows runs (`changed_since`,
    # `statuses_since`). Added after the table: `RunStore.create` adds it to databases made without it.
    sa.Index("mcp_team_runs_updated", "updated_at"),
)
answers_table = sa.Table(
    # A person's answer to a checkpoint of a run that waits on another replica, until that replica takes it
    # (runs/approvals.py): rows live a second or two.
    "mcp_team_checkpoint_answers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(128), nullable=False),
    sa.Column("checkpoint", sa.String(200), nullable=False),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Index("mcp_team_checkpoint_answers_run", "run_id"),
)


class Resumed(BaseModel):
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


def row_of(r: RunRecord) -> dict[str, Any]:
    """The runs table's columns for `r`."""
    return {
        "workflow_id": r.workflow_id,
        "status": r.status,
        "thread_id": r.thread,
        "executor_id": r.executor_id,
        "resumable": r.resumable,
        "app_version": r.app_version,
        "started_at": r.started_at.timestamp(),
        "updated_at": r.updated_at.timestamp(),
        "record": r.model_dump_json(),
    }


def now() -> datetime:
    return datetime.now(UTC)
