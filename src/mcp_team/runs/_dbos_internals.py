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
DBOS), recovery of another executor's pending workflows (issue 16, takeover), and two shortcuts in how
DBOS checkpoints steps (`speed_up_checkpoints`, below).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
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
    """Poll DBOS's internal queue every `polling_interval_sec` instead of each second: recovered and
    resumed workflows (a takeover, `_recover_pending_workflows`) are re-enqueued there, so the default
    left a run taken over from a dead replica idle for up to two seconds. Call after `DBOS(config=...)`,
    before `launch()` (the registry creates the queue on first use; we create it first, with our limit).
    """
    from dbos._dbos import _get_dbos_instance
    from dbos._utils import INTERNAL_QUEUE_NAME

    registry = _get_dbos_instance()._registry
    if INTERNAL_QUEUE_NAME not in registry.internal_queue_map:
        registry._register_internal_queue(INTERNAL_QUEUE_NAME, polling_interval_sec=polling_interval_sec)


# --- Checkpoint shortcuts -------------------------------------------------------------------------
# Before each step DBOS reads the step's row (a recorded output to replay; a cancelled workflow), and
# after it writes the output in a transaction of its own, each a round trip through a worker thread on the
# one pooled SQLite connection. A K=32 fan-out queued 32 reads before its model calls and 32 commits
# after them (wall/ideal 1.3 where the engine alone gives 1.05). Two shortcuts, same rows, same replay:
# - reads: a run's execution lists its recorded step ids once (`known_steps`); a step whose id is not
#   among them has nothing to replay and skips the read. Ids are only recorded by the workflow's owner,
#   and a new owner (a takeover) makes our own write fail (`DBOSWorkflowConflictIDError`), so the list
#   cannot go stale unnoticed. Lost with the read: noticing a cancel before the step instead of at its
#   write; `Runs` stops a cancelled run's task itself (at once here, within a second from elsewhere).
# - writes: step outputs that wait for the connection at the same moment are written in one transaction
#   (one ownership check per workflow, one multi-row insert): group commit. Each caller still returns only
#   once its own row is committed. A batch that fails for any reason is written again row by row through
#   DBOS's own method, so errors (a duplicate step, a lost ownership) reach the step they belong to.

_known: dict[str, frozenset[int]] = {}


def recorded_step_ids(workflow_id: str) -> frozenset[int]:
    """The ids of the steps recorded for `workflow_id` (blocking)."""
    sys_db = _sys_db()
    table = sys_db.tables.operation_outputs
    with sys_db.engine.connect() as conn:
        rows = conn.execute(sa.select(table.c.function_id).where(*sys_db._wf(table, workflow_id))).all()
    return frozenset(r[0] for r in rows)


@contextmanager
def known_steps(workflow_id: str, recorded: frozenset[int]) -> Iterator[None]:
    """While the block runs (the workflow's execution here), checks of step ids not in `recorded` skip
    the database: `recorded` must come from `recorded_step_ids` after this execution took the workflow."""
    _known[workflow_id] = recorded
    try:
        yield
    finally:
        if _known.get(workflow_id) is recorded:
            del _known[workflow_id]


class _GroupCommit:
    """Step outputs written together when they wait for the database at the same moment (see above)."""

    def __init__(self, sys_db: Any) -> None:
        self.sys_db = sys_db
        self.record_one: Callable[..., None] = sys_db.record_operation_result
        self.insert = sa.insert(sys_db.tables.operation_outputs).values(retention_timestamp=sys_db._now_ms_sql())
        self.queue: list[_Output] = []
        self.queue_lock = threading.Lock()
        self.leading = False  # a thread is writing the queue: others wait for their output to be written
        self.writer = threading.Lock()
        self.batches = 0  # transactions of more than one output, for tests

    def record(self, result: dict[str, Any], **options: Any) -> None:
        if options:  # a write on another workflow's behalf or at a given time: DBOS's own path
            return self.record_one(result, **options)
        ctx = dbos_context.get_local_dbos_context()
        workflow_id = result["workflow_uuid"]
        mine = ctx is not None and ctx.workflow_id == workflow_id
        out = _Output(
            result,
            int(time.time() * 1000),
            dbos_context.current_owner_xid(workflow_id, ctx),
            ctx.shard_key if mine and ctx is not None else None,
            self.sys_db._child_values(result["child_workflow_id"]),
        )
        with self.queue_lock:
            self.queue.append(out)
            lead, self.leading = not self.leading, True
        if lead:  # write batches until the queue is empty: no hand-over between threads while outputs wait
            with self.writer:
                self._drain()
        else:
            out.written.wait()
        if out.error is not None:
            raise out.error

    def _drain(self) -> None:
        try:
            while True:
                with self.queue_lock:
                    batch, self.queue = self.queue, []
                    if not batch:
                        self.leading = False
                        return
                self._write(batch)
        except BaseException as exc:  # never leave waiting steps behind
            with self.queue_lock:
                stranded, self.queue, self.leading = self.queue, [], False
            for out in stranded:
                out.error = RuntimeError(f"the step's output was not written: {exc!r}")
                out.written.set()
            raise

    def _write(self, batch: list[_Output]) -> None:
        try:
            if len(batch) > 1:
                try:
                    self._write_together(batch)
                    self.batches += 1
                    return
                except Exception:  # rolled back: each output again, on DBOS's path, to give each its own error
                    pass
            for out in batch:
                try:
                    self.record_one(out.result, completed_at_epoch_ms=out.completed, owner_xid=out.owner_xid,
                                    owner_key=out.key)  # fmt: skip
                except Exception as exc:  # raised in the thread of the step it belongs to
                    out.error = exc
        finally:
            for out in batch:
                out.written.set()

    def _write_together(self, batch: list[_Output]) -> None:
        from dbos._shard_keys import bind_shard_keys

        sys_db = self.sys_db
        owners = {(o.result["workflow_uuid"], o.key, o.owner_xid) for o in batch if o.owner_xid is not None}
        rows = []
        for o in batch:
            r = o.result
            assert r["error"] is None or r["output"] is None, "Only one of error or output can be set"
            rows.append({**sys_db._wf_values(r["workflow_uuid"]), **o.child_values,
                         "workflow_uuid": r["workflow_uuid"], "function_id": r["function_id"],
                         "function_name": r["function_name"], "started_at_epoch_ms": r["started_at_epoch_ms"],
                         "completed_at_epoch_ms": o.completed, "output": r["output"], "error": r["error"],
                         "child_workflow_id": r["child_workflow_id"], "serialization": r["serialization"],
                         "application_name": sys_db.app_name})  # fmt: skip
        with sys_db.engine.begin() as conn:
            for workflow_id, key, owner_xid in owners:
                with bind_shard_keys({workflow_id: key}):
                    sys_db._check_owner_txn(conn, workflow_id, owner_xid)
            conn.execute(self.insert, rows)


class _Output:
    __slots__ = ("child_values", "completed", "error", "key", "owner_xid", "result", "written")

    def __init__(self, result: dict[str, Any], completed: int, owner_xid: str | None, key: str | None,
                 child_values: dict[str, Any]) -> None:  # fmt: skip
        self.result, self.completed, self.owner_xid, self.key = result, completed, owner_xid, key
        self.child_values = child_values
        self.written = threading.Event()
        self.error: Exception | None = None


def _sys_db() -> Any:
    from dbos._dbos import _get_dbos_instance

    return _get_dbos_instance()._sys_db


def speed_up_checkpoints() -> _GroupCommit:
    """Install both shortcuts on the launched DBOS's system database (after `DBOS.launch()`)."""
    sys_db = _sys_db()
    check_one = sys_db.check_operation_execution

    def check(workflow_id: str, function_id: int, function_name: str, **options: Any) -> Any:
        recorded = _known.get(workflow_id)
        if recorded is not None and function_id not in recorded and not options:
            return None  # nothing recorded at this id: run the step
        return check_one(workflow_id, function_id, function_name, **options)

    global _group
    _group = _GroupCommit(sys_db)
    sys_db.check_operation_execution = check
    sys_db.record_operation_result = _group.record
    return _group


_group: _GroupCommit | None = None


def group_commit() -> _GroupCommit | None:
    """The group commit of the launched DBOS (None before `speed_up_checkpoints`): for tests."""
    return _group
