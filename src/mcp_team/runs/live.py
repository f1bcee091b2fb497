"""The runs executing in this process: what the run service keeps of each while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from mcp_team.handoffs.checkpoints import Approver, Checkpoint
from mcp_team.runs.records import Progress
from mcp_team.runs.types import Engine, EventSink


@dataclass
class Live:
    """A run executing in this process."""

    progress: Progress
    engine: Engine
    on_event: EventSink | None = None
    approve: Approver | None = None  # the session's, while it is attached (runs/approvals.py)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancel_reason: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    # Set once DBOS's half of `Runs.cancel` is done: a durable run cancelled so ends its workflow only then, so that
    # DBOS records the workflow cancelled (it keeps a workflow that ended first as succeeded).
    workflow_cancelled: anyio.Event = field(default_factory=anyio.Event)
    fresh: bool = True  # started here by this process (False: resumed, or taken off the shared queue)
    # Resumed while its record showed it waiting at this checkpoint: its replay comes back to it, and an answer given
    # meanwhile waits for that (`Runs.answer`); None once it waits at a checkpoint again.
    back_to: Checkpoint | None = None
