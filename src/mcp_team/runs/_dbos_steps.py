"""How DBOS checkpoints our steps, shortened: the second module that uses DBOS internals (with
`_dbos_internals.py`), valid for `dbos==3.4.0` only (pinned exactly; `check_dbos_version` refuses others).

Before each step DBOS reads the step's row (a recorded output to replay; a cancelled workflow), and
after it writes the output in a transaction of its own, each a round trip through a worker thread on the
one pooled SQLite connection. A K=32 fan-out queued 32 reads before its model calls and 32 commits
after them (wall/ideal 1.3 where the engine alone gives 1.05). Shortcuts, same rows, same replay:
- reads: a run's execution lists its recorded step ids once (`known_steps`); a step whose id is not
  among them has nothing to replay and skips the read. Ids are only recorded by the workflow's owner,
  and a new owner (a takeover) makes our own write fail (`DBOSWorkflowConflictIDError`), so the list
  cannot go stale unnoticed. Lost with the read: noticing a cancel before the step instead of at its
  write; `Runs` stops a cancelled run's task itself (at once here, within a second from elsewhere).
- writes: one writer thread takes every step output queued meanwhile and writes them in one transaction
  (one ownership check per workflow, one multi-row insert): group commit. Each caller still returns only
  once its own row is committed. A batch that fails for any reason is written again row by row through
  DBOS's own method, so errors (a duplicate step, a lost ownership) reach the step they belong to.
- the step itself (`run_step`): a fresh step (nothing to replay) runs without DBOS's per-step work on the
  event loop (a thread hop for the read it skips, a tracing span, a chain of closures), and hands its value
  to the writer thread, which serializes it as DBOS would and wakes the batch's steps with one callback on
  the loop; a step that may have been recorded goes through DBOS (whose own write also goes to the writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from dbos import _context as dbos_context

from mcp_team.runs.database import is_full, reason_of

if TYPE_CHECKING:
    from dbos._sys_db import OperationResultInternal

T = TypeVar("T")

FULL_RETRY = 1.0  # seconds between writes of step outputs while the database's disk is full
FULL_LOG_EVERY = 30.0  # seconds between warnings meanwhile
log = logging.getLogger("mcp_team.runs")

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


async def run_step(name: str, func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`func(*args)` as the step `name` of the current workflow (call it in workflow code).

    A step that may have been recorded (its id is among the execution's `known_steps`, or none are known)
    goes through DBOS's `run_step_async`, which replays it. A fresh one takes the same id (the same
    `snapshot_step_ctx`), runs in a step context of its own (so wrappers inside pass through and DBOS
    calls see a step) and records its output or error as DBOS would (through the writer thread, see
    `_GroupCommit`), without DBOS's per-step overhead on the event loop: a thread hop for the read it
    skips, a tracing span, a chain of closures. Not carried over: DBOS's retries and preemption (never asked for
    here). A `DBOSWorkflowCancelledError` from the body is not recorded, as in DBOS."""
    from dbos._core import run_step_async
    from dbos._dbos import DBOS, _get_dbos_instance
    from dbos._error import DBOSWorkflowCancelledError
    from dbos._serialization import serialize_exception, serialize_value

    ctx = dbos_context.get_local_dbos_context()
    assert ctx is not None and ctx.is_workflow(), "run_step is called in workflow code"
    dbos = _get_dbos_instance()
    step_ctx = ctx.snapshot_step_ctx()
    workflow_id, function_id = step_ctx.workflow_id, step_ctx.function_id
    recorded = _known.get(workflow_id)
    if recorded is None or function_id in recorded:
        await DBOS._configure_asyncio_thread_pool()
        return await run_step_async(dbos, step_ctx, func, {"name": name}, args, {})  # type: ignore[arg-type]
    output: OperationResultInternal = {"workflow_uuid": workflow_id, "function_id": function_id, "function_name": name,
                              "output": None, "error": None, "serialization": None,
                              "started_at_epoch_ms": int(time.time() * 1000), "child_workflow_id": None}  # fmt: skip
    step_ctx.curr_step_function_id = function_id
    step_ctx.step_status = dbos_context.StepStatus(function_id, None, None)
    token = dbos_context._dbos_context_var.set(step_ctx)
    group = _group
    assert group is not None, "speed_up_checkpoints ran at launch"
    serializer = dbos._serializer
    try:
        try:
            value = await func(*args)
        except DBOSWorkflowCancelledError:
            raise
        except Exception as exc:
            error = exc
            await group.record_async(output, lambda: serialize_exception(error, None, serializer), "error")
            raise
        await group.record_async(output, lambda: serialize_value(value, None, serializer))
        return value
    finally:
        dbos_context._dbos_context_var.reset(token)


class _GroupCommit:
    """Step outputs written together when they wait for the database at the same moment (see above), by
    one writer thread of its own. A step on the event loop hands its value over without a thread hop
    (`record_async`: the writer serializes it) and is woken with the others of its batch by one callback
    on the loop; DBOS's own path (`record`, in a worker thread) waits on an event."""

    def __init__(self, sys_db: Any) -> None:
        self.sys_db = sys_db
        self.record_one: Callable[..., None] = sys_db.record_operation_result
        self.insert = sa.insert(sys_db.tables.operation_outputs).values(retention_timestamp=sys_db._now_ms_sql())
        self.queue: list[_Output] = []
        self.queue_lock = threading.Condition()
        self.writer = threading.Lock()  # held while a batch is written (tests hold it to make outputs queue)
        self.stopping = False
        self.batches = 0  # transactions of more than one output, for tests
        self.thread = threading.Thread(target=self._run, name="mcp-team-step-writer", daemon=True)
        self.thread.start()

    def record(self, result: dict[str, Any], **options: Any) -> None:
        if options:  # a write on another workflow's behalf or at a given time: DBOS's own path
            return self.record_one(result, **options)
        out = self._output(result)
        out.written = threading.Event()
        self._enqueue(out)
        out.written.wait()
        if out.error is not None:
            raise out.error

    async def record_async(self, result: Any, serialize: Callable[[], tuple[Any, Any]], field: str = "output") -> None:
        """Record `result` once the writer has filled its `field` ("output" or "error") and serialization
        with `serialize()` (called in the writer thread, off the event loop); returns once it is committed,
        raises what failed (its own error)."""
        out = self._output(result)
        out.serialize, out.field = serialize, field
        out.future = asyncio.get_running_loop().create_future()
        self._enqueue(out)
        await out.future

    def _output(self, result: dict[str, Any]) -> _Output:
        ctx = dbos_context.get_local_dbos_context()
        workflow_id = result["workflow_uuid"]
        mine = ctx is not None and ctx.workflow_id == workflow_id
        return _Output(
            result,
            int(time.time() * 1000),
            dbos_context.current_owner_xid(workflow_id, ctx),
            ctx.shard_key if mine and ctx is not None else None,
            self.sys_db._child_values(result["child_workflow_id"]),
        )

    def _enqueue(self, out: _Output) -> None:
        with self.queue_lock:
            if self.stopping:
                raise RuntimeError("durable runs are shut down: the step's output cannot be written")
            self.queue.append(out)
            if len(self.queue) == 1:
                self.queue_lock.notify()

    def stop(self) -> None:
        """Write what is queued, then end the writer thread (before DBOS's engine is disposed)."""
        with self.queue_lock:
            self.stopping = True
            self.queue_lock.notify()
        self.thread.join()

    def _run(self) -> None:
        while True:
            with self.queue_lock:
                while not self.queue and not self.stopping:
                    self.queue_lock.wait()
                if not self.queue:
                    return
            with self.writer:
                with self.queue_lock:
                    batch, self.queue = self.queue, []
                try:
                    self._write([out for out in batch if out.prepare()])
                except BaseException as exc:  # never leave waiting steps behind
                    for out in batch:
                        if out.error is None:
                            out.error = RuntimeError(f"the step's output was not written: {exc!r}")
            _wake(batch)

    def _write(self, batch: list[_Output]) -> None:
        from dbos._error import DBOSBaseException  # DBOS's errors (a lost ownership among them) are not Exceptions

        waited = 0.0
        while batch:  # one output too: fewer statements than DBOS's own write (measured 1.1 ms vs 1.7 ms)
            try:
                self._write_together(batch)
                self.batches += len(batch) > 1
                return
            except (Exception, DBOSBaseException) as exc:
                if not is_full(exc) or self.stopping:
                    break  # rolled back: each output again, on DBOS's path, to give each its own error
                # A full disk: the steps wait (their runs pause) until there is space, as for a database that is
                # away; failing them would fail their runs for good.
                if waited == 0 or waited >= FULL_LOG_EVERY:
                    log.warning("the runs database's disk is full (%s); the runs wait until space is freed",
                                reason_of(exc))  # fmt: skip
                    waited = 0.0
                time.sleep(FULL_RETRY)
                waited += FULL_RETRY
        for out in batch:
            try:
                self.record_one(out.result, completed_at_epoch_ms=out.completed, owner_xid=out.owner_xid,
                                owner_key=out.key)  # fmt: skip
            except (Exception, DBOSBaseException) as exc:  # raised in the step it belongs to
                out.error = exc

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
    __slots__ = ("child_values", "completed", "error", "field", "future", "key", "owner_xid", "result",
                 "serialize", "written")  # fmt: skip

    def __init__(self, result: dict[str, Any], completed: int, owner_xid: str | None, key: str | None,
                 child_values: dict[str, Any]) -> None:  # fmt: skip
        self.result, self.completed, self.owner_xid, self.key = result, completed, owner_xid, key
        self.child_values = child_values
        self.written: threading.Event | None = None  # a waiting thread (DBOS's path)
        self.future: asyncio.Future[None] | None = None  # or a waiting step on the event loop
        self.serialize: Callable[[], tuple[Any, Any]] | None = None
        self.field = "output"
        self.error: BaseException | None = None

    def prepare(self) -> bool:
        """Fill in the serialized output (in the writer thread); False if it cannot be serialized."""
        if self.serialize is None:
            return True
        try:
            value, serialization = self.serialize()
        except Exception as exc:
            self.error = exc
            return False
        self.result[self.field], self.result["serialization"] = value, serialization
        return True


def _wake(batch: list[_Output]) -> None:
    """Wake every caller of `batch`: threads at once, steps with one callback per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Output]] = {}
    for out in batch:
        if out.written is not None:
            out.written.set()
        elif out.future is not None:
            by_loop.setdefault(out.future.get_loop(), []).append(out)
    for loop, outs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle, outs)


def _settle(outs: list[_Output]) -> None:
    for out in outs:
        if out.future is not None and not out.future.done():  # a cancelled step no longer waits
            if out.error is not None:
                out.future.set_exception(out.error)
            else:
                out.future.set_result(None)


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
    if _group is not None:
        _group.stop()
    _group = _GroupCommit(sys_db)
    sys_db.check_operation_execution = check
    sys_db.record_operation_result = _group.record
    return _group


_group: _GroupCommit | None = None


def stop_checkpoints() -> None:
    """Write the step outputs still queued and end the writer thread (before `DBOS.destroy`)."""
    global _group
    if _group is not None:
        _group.stop()
        _group = None


def group_commit() -> _GroupCommit | None:
    """The group commit of the launched DBOS (None before `speed_up_checkpoints`): for tests."""
    return _group
