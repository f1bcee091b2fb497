"""The runs database's own tables (next to DBOS's); a row holds a run's `RunRecord` (runs/types.py) as JSON."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from mcp_team.runs.at_rest import record_json
from mcp_team.runs.types import RunRecord

STORE_SCHEMA = 1
"""Version of the tables below. A database whose recorded schema is newer is refused at start-up."""

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
        "record": record_json(r),  # secrets redacted (runs/at_rest.py)
    }
