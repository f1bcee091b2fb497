"""Every use of DBOS internals, in one place. Valid for `dbos==3.4.0` only (pinned exactly in pyproject.toml).

DBOS numbers a workflow's steps with one counter (`DBOSContext.function_id`) shared by every task of the
workflow, so concurrent branches that each run several steps get ids in the order their steps *start*,
and a replay after a crash hands recorded outputs to the wrong branch. `step_namespace` gives the code
inside it a private copy of the current `DBOSContext` whose counter starts at a base derived from the
branch's number, so each branch's steps have ids of their own whatever the interleaving.

What a `DBOSContext` holds by reference, and what a branch does with it (checked against 3.4.0):
- `context_spans` (the stack of DBOS spans, pushed and popped around each step): copied per branch, or
  concurrent branches would pop each other's spans.
- `authenticated_roles`: copied.
- `used_datasources` (datasources the workflow called; cleaned up when the workflow ends): shared on
  purpose, so the workflow still sees them; append-only, on one event loop.
- everything else is a scalar, an immutable value or a logger, copied by value.
`_KNOWN_FIELDS` lists the 3.4.0 fields: a DBOS release that adds or renames one fails at the first
branch with a message pointing here, and the kill/replay tests (tests/test_runs_replay.py) fail too.

Also here: the migration versions of DBOS's system tables (to refuse a database written by a newer
DBOS), recovery of another executor's pending workflows (issue 16, takeover), and starting DBOS's executor
threads at launch. How steps are checkpointed (fewer round trips than DBOS's own way) is in `_dbos_steps.py`,
the other module that uses DBOS internals.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.metadata import version
from typing import Any

import sqlalchemy as sa
from dbos import _context as dbos_context

DBOS_VERSION = "3.4.0"

# Step-id layout. Step ids are INT4 on PostgreSQL (max 2**31 - 1), so 31 bits are split:
#   [ branch: 9 bits ][ sub-branch: 6 bits ][ sub-sub-branch: 5 bits ][ step: 11 bits ]
# Namespace () is the run itself (steps 1..2047); (s,) is handoff seq s-1 (s = 1..511); (s, t) is branch t
# (1..63) inside it, for the handoffs of a team's sub-run (issue 13); (s, t, u) is branch u (1..31) inside
# that, for a team inside a team: room for the deepest tree the team files allow by default
# (max_team_depth = 3). The largest id, (511 << 22) | (63 << 16) | (31 << 11) | 2047, is exactly 2**31 - 1.
# Changing this layout renumbers recorded steps: bump REPLAY_FORMAT (runs/config.py) with it.
STEP_BITS = 11
LEVEL_BITS = (9, 6, 5)  # branch, sub-branch, sub-sub-branch
MAX_DEPTH = len(LEVEL_BITS)  # levels of branches: a team tree this deep (the run's own handoffs count 1)
MAX_STEPS = (1 << STEP_BITS) - 1  # steps per namespace
MAX_BRANCHES = (1 << LEVEL_BITS[0]) - 1  # handoffs per run
_LEVELS = tuple(
    (STEP_BITS + sum(LEVEL_BITS[i + 1 :]), (1 << bits) - 1) for i, bits in enumerate(LEVEL_BITS)
)  # (shift, largest number) of each level

_KNOWN_FIELDS = frozenset(
    {
        "executor_id", "app_id", "logger", "id_assigned_for_next_workflow", "derived_from",
        "workflow_id_reuse_policy", "start_options", "parent_workflow_id", "parent_workflow_fid",
        "workflow_id", "shard_key", "function_id", "owner_xid", "curr_step_function_id",
        "active_stream_reads", "sync_ds_session", "async_ds_session", "used_datasources", "context_spans",
        "authenticated_user", "authenticated_roles", "assumed_role", "step_status", "serialization_type",
        "workflow_deadline_epoch_ms",
    }
)  # fmt: skip

_namespace: ContextVar[tuple[int, ...]] = ContextVar("mcp_team_step_namespace", default=())


class InternalsChanged(RuntimeError):
    """The installed DBOS is not the version these internals were written for."""


def check_dbos_version() -> None:
    found = version("dbos")
    if found != DBOS_VERSION:
        raise InternalsChanged(
            f"mcp-team needs dbos=={DBOS_VERSION} exactly (found {found}); reinstall mcp-team "
            f"(pip install -e .) or review src/mcp_team/runs/_dbos_internals.py for the new version"
        )


def in_workflow() -> bool:
    """True in workflow code (not inside a step): where a step call is checkpointed."""
    ctx = dbos_context.get_local_dbos_context()
    return ctx is not None and ctx.is_workflow()


def namespace_base(path: tuple[int, ...]) -> int:
    """The id just before the first step of namespace `path` (see the layout above)."""
    if len(path) > MAX_DEPTH:
        raise ValueError(
            f"a durable run nests teams {MAX_DEPTH} deep at most (this branch is {len(path)} deep): "
            f"flatten a level of the team tree, or run it with durability off"
        )
    base = 0
    for value, (shift, limit) in zip(path, _LEVELS, strict=False):
        if not 1 <= value <= limit:
            raise ValueError(f"branch number {value} is outside 1..{limit} at nesting level {len(path)}")
        base |= value << shift
    return base


def current_namespace() -> tuple[int, ...]:
    return _namespace.get()


def steps_left() -> int:
    """How many more steps the current namespace can number before it runs into the next one."""
    ctx = dbos_context.get_local_dbos_context()
    if ctx is None or not ctx.is_workflow():
        return MAX_STEPS
    return namespace_base(_namespace.get()) + MAX_STEPS - ctx.function_id


@contextmanager
def step_namespace(index: int) -> Iterator[None]:
    """Run the block as branch `index` (1-based) of the current namespace, with its own step counter.

    Enter it in the task that runs the branch; outside a workflow it does nothing.
    """
    parent = dbos_context.get_local_dbos_context()
    if parent is None or not parent.is_workflow():
        yield
        return
    fields = vars(parent)
    if set(fields) != _KNOWN_FIELDS:
        raise InternalsChanged(
            f"DBOSContext fields changed (added {sorted(set(fields) - _KNOWN_FIELDS)}, removed "
            f"{sorted(_KNOWN_FIELDS - set(fields))}); review src/mcp_team/runs/_dbos_internals.py"
        )
    path = (*_namespace.get(), index)
    child = dbos_context.DBOSContext()
    child.__dict__.update(fields)
    child.context_spans = list(parent.context_spans)
    if parent.authenticated_roles is not None:
        child.authenticated_roles = list(parent.authenticated_roles)
    child.function_id = namespace_base(path)
    token = dbos_context._dbos_context_var.set(child)
    ns_token = _namespace.set(path)
    try:
        yield
    finally:
        _namespace.reset(ns_token)
        dbos_context._dbos_context_var.reset(token)


async def workflow_status(workflow_id: str) -> Any:
    """DBOS's status of `workflow_id`, read as from outside any workflow. In workflow code DBOS makes the
    read a step, and a step of a cancelled workflow fails (at its read, or at its write once the cancel
    took the workflow's ownership away), so a run could not learn that it was cancelled: it raised from
    its error handler and left its record running."""
    from dbos import DBOS

    token = dbos_context._dbos_context_var.set(None)
    try:
        return await DBOS.get_workflow_status_async(workflow_id)
    finally:
        dbos_context._dbos_context_var.reset(token)


def migration_versions(engine: sa.Engine, schema: str = "dbos") -> tuple[int, int]:
    """(recorded, known) versions of DBOS's system tables: recorded > known means a newer DBOS wrote them."""
    from dbos import _migration

    if engine.dialect.name == "sqlite":
        return _migration.get_sqlite_migration_versions(engine)
    return _migration.get_migration_versions(engine, schema, use_listen_notify=True)


def recover_executor(executor_ids: list[str]) -> list[Any]:
    """Resume the pending workflows of dead executors here (blocking; run it in a thread)."""
    from dbos import DBOS

    return DBOS._recover_pending_workflows(executor_ids)


def adopt_event_loop(loop: Any) -> None:
    """Make DBOS run recovered and dequeued async workflows on `loop` (the server's), not on its own
    background loop thread. DBOS adopts the loop of the thread that calls `launch()`, but we launch in a
    worker thread (launch blocks on database I/O); call this after `DBOS(config=...)`, before `launch()`.
    """
    from dbos._dbos import _get_dbos_instance

    _get_dbos_instance()._background_event_loop._main_loop = loop


def tune_internal_queue(polling_interval_sec: float) -> None:
    """Poll DBOS's internal queue every `polling_interval_sec` (`DurableConfig.queue_poll`) instead of each
    second: recovered and resumed workflows (a takeover, `_recover_pending_workflows`) are re-enqueued there, so
    the default left a run taken over from a dead replica idle for up to two seconds. Call after `DBOS(config=...)`,
    before `launch()` (the registry creates the queue on first use; we create it first, with our limit).
    """
    from dbos._dbos import _get_dbos_instance
    from dbos._utils import INTERNAL_QUEUE_NAME

    registry = _get_dbos_instance()._registry
    if INTERNAL_QUEUE_NAME not in registry.internal_queue_map:
        registry._register_internal_queue(INTERNAL_QUEUE_NAME, polling_interval_sec=polling_interval_sec)


def space_background_jobs(interval_sec: float | None) -> None:
    """Run DBOS's background jobs every `interval_sec` instead of every second (None: DBOS's own interval).

    They enqueue delayed workflows and cancel workflows past their DBOS timeout; mcp-team makes neither (a run's
    deadline is the engine's), so each pass finds nothing, but it costs two SQL statements through SQLAlchemy:
    over a third of an idle server's CPU (0.34 of 0.77% of a core, all day, in a Claude Desktop that keeps the
    server running: benchmarks/idle.py). For SQLite only: there the jobs' lock is no lock, while on PostgreSQL the
    process holding it keeps a transaction open for the whole interval, which the 5 s idle timeout DBOS sets on it
    would end. A module
    constant DBOS reads when its background thread starts, so process-wide: `launch` sets it before every launch,
    for the database it opens. Call before `launch()`."""
    from dbos import _workflow_commands

    if not hasattr(_workflow_commands, "_BACKGROUND_JOBS_INTERVAL_SEC"):
        raise RuntimeError(f"dbos {version('dbos')} has no _BACKGROUND_JOBS_INTERVAL_SEC; see {__name__}")
    global _dbos_background_interval
    if _dbos_background_interval is None:
        _dbos_background_interval = _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC
    _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC = interval_sec or _dbos_background_interval


_dbos_background_interval: float | None = None  # DBOS's own, kept when first changed


def start_executor_threads(count: int) -> None:
    """Start `count` threads of DBOS's executor now (call after `launch()`, with `max_executor_threads` set to
    `count`). The pool starts them lazily, one per call that finds none idle: during the first burst of runs,
    whose short-lived objects then share memory arenas with the threads' long-lived ones, so the arenas could
    not be returned after the burst. Each call here blocks its thread until all are submitted, so each starts
    one."""
    from dbos._dbos import _get_dbos_instance

    executor = _get_dbos_instance()._executor
    started = threading.Event()
    for _ in range(count):
        executor.submit(started.wait, 10.0)
    started.set()
