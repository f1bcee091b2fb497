"""Several replicas on one PostgreSQL database: heartbeats, takeover of a dead replica's runs, the run queue.

Each replica keeps a row in `mcp_team_replicas` whose lease it renews every `lease/4` seconds. A replica
whose lease has expired AND whose executor id nobody holds (its PostgreSQL advisory lock died with its
connection: kill -9, a lost machine) is dead. A live replica then takes its runs over:

1. claims the dead row with a conditional UPDATE (`... WHERE lease_until < now`): of several live
   replicas, exactly one sees a row changed, the others skip it for one lease;
2. takes the dead id's lease itself, so the dead replica cannot come back half-way through (it waits
   `executor.TAKEOVER_GRACE` at start-up, then resumes whatever is still its own);
3. settles the dead executor's runs as a restart would (runs/recovery.py): the ones that can go on are resumed
   on this replica's own queue, each with all its branches, from their last recorded steps; runs on the
   client's model are marked interrupted, runs of another replay format interrupted;
4. deletes the dead row and releases the id.

A replica restarted with its own id before its lease expired resumes its runs itself (DBOS does it at
launch). Clocks: leases are wall-clock times written by each replica, so replicas' clocks must agree to
well within a lease (NTP does).

A run starts on the replica that was asked, unless that replica already runs `runs_per_replica`: then it goes
on one DBOS queue shared by every replica (`launch.RUN_QUEUE`: any replica with room takes it, `max_runs` at
once across all), polled every `queue_poll` seconds.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import sqlalchemy as sa
from dbos import DBOS

from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import reason_of
from mcp_team.runs.executor import ExecutorLease, try_acquire
from mcp_team.runs.launch import RUN_QUEUE
from mcp_team.runs.shared_limits import PostgresRate, create_tables
from mcp_team.runs.types import RunInput
from mcp_team.runs.workflow import run_workflow

log = logging.getLogger(__name__)

metadata = sa.MetaData()
replicas_table = sa.Table(
    "mcp_team_replicas",
    metadata,
    sa.Column("executor_id", sa.String(128), primary_key=True),
    sa.Column("host", sa.String(256), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("lease_until", sa.Float, nullable=False),
    sa.Column("taken_over_by", sa.String(128), nullable=True),
)


class Replicas:
    """This replica's heartbeat and the takeover of dead ones (PostgreSQL only)."""

    def __init__(
        self,
        config: DurableConfig,
        engine: sa.Engine,
        lease: ExecutorLease,
        settle: Callable[[str], Awaitable[Sequence[Any]]],
    ) -> None:
        self.config = config
        self.engine = engine
        self.lease = lease
        self.settle = settle
        self.rate = PostgresRate(engine)  # the model-call rate shared by every replica (`Limiters.share`)
        self.taken_over: list[str] = []  # executor ids this replica took runs over from (for tests, logs)
        self._loop = anyio.CancelScope()
        self._looping: anyio.Event | None = None  # set while `run` runs; None before it starts

    @property
    def executor_id(self) -> str:
        return self.lease.executor_id

    def busy(self, running: int) -> bool:
        """Whether a run started here goes on the shared queue instead of starting here at once: always when runs are
        capped across replicas (`max_runs`: the queue counts them exactly, at the cost of a poll before each run
        starts), else when this replica, running `running` runs, has no room for another (`runs_per_replica`)."""
        per_replica = self.config.runs_per_replica
        return self.config.max_runs is not None or (per_replica is not None and running >= per_replica)

    # --- blocking parts (run in a worker thread) --------------------------------------------------
    def register(self) -> None:
        """Create the table if needed and write this replica's row (a restart replaces its old one)."""
        create_tables(metadata, self.engine)
        t = time.time()
        row = {"executor_id": self.executor_id, "host": socket.gethostname(), "pid": os.getpid(), "started_at": t,
               "heartbeat_at": t, "lease_until": t + self.config.lease_seconds, "taken_over_by": None}  # fmt: skip
        with self.engine.begin() as conn:
            conn.execute(sa.delete(replicas_table).where(replicas_table.c.executor_id == self.executor_id))
            conn.execute(sa.insert(replicas_table).values(row))

    def beat(self) -> None:
        """Renew the lease (and the executor-id lock, if a database restart dropped its connection)."""
        t = time.time()
        with self.engine.begin() as conn:
            renewed = conn.execute(
                sa.update(replicas_table)
                .where(replicas_table.c.executor_id == self.executor_id)
                .values(heartbeat_at=t, lease_until=t + self.config.lease_seconds)
            ).rowcount
        if not self.lease.alive():
            self._relock()
        if not renewed:  # our row was taken over (we were unreachable longer than a lease): come back
            log.warning("replica %s was presumed dead and its runs taken over; rejoining", self.executor_id)
            self.register()

    def _relock(self) -> None:
        fresh = try_acquire(self.config, self.engine, self.executor_id)
        if fresh is None:
            log.warning("replica %s: another process holds its executor id now", self.executor_id)
            return
        self.lease.release()
        self.lease._conn, fresh._conn = fresh._conn, None

    def dead(self) -> list[str]:
        """Executor ids whose lease has expired."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(replicas_table.c.executor_id).where(
                    replicas_table.c.lease_until < time.time(), replicas_table.c.executor_id != self.executor_id
                )
            ).all()
        return [r[0] for r in rows]

    def claim(self, executor_id: str) -> ExecutorLease | None:
        """Exclusively claim a dead replica (one live replica wins), and hold its id; None if we lost or it
        is alive after all (its lock is held: only its heartbeat was late)."""
        t = time.time()
        with self.engine.begin() as conn:
            won = conn.execute(
                sa.update(replicas_table)
                .where(replicas_table.c.executor_id == executor_id, replicas_table.c.lease_until < t)
                .values(lease_until=t + self.config.lease_seconds, taken_over_by=self.executor_id)
            ).rowcount
        if not won:
            return None
        return try_acquire(self.config, self.engine, executor_id)

    def forget(self, executor_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                sa.delete(replicas_table).where(
                    replicas_table.c.executor_id == executor_id, replicas_table.c.taken_over_by == self.executor_id
                )
            )

    def leave(self) -> None:
        """A clean stop: expire our lease now, so another replica takes our pending runs at once (a
        restart with the same id before that resumes them itself)."""
        with self.engine.begin() as conn:
            conn.execute(sa.update(replicas_table).where(replicas_table.c.executor_id == self.executor_id)
                         .values(lease_until=0.0))  # fmt: skip

    # --- the loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Heartbeat and look for dead replicas until `stop`; a database away is retried, not fatal."""
        period = self.config.lease_seconds / 4
        self._looping = anyio.Event()
        try:
            with self._loop:
                while True:
                    try:
                        await anyio.to_thread.run_sync(self.beat)
                        for executor_id in await anyio.to_thread.run_sync(self.dead):
                            await self.take_over(executor_id)
                    except sa.exc.SQLAlchemyError as exc:
                        log.warning("replica %s: heartbeat failed (%s); retrying", self.executor_id, reason_of(exc))
                    await anyio.sleep(period)
        finally:
            self._looping.set()

    async def stop(self) -> None:
        """End the loop, waiting for a beat under way in a worker thread: a beat after the lease's release
        would find it dead and take the executor id again, on a connection nobody would close."""
        self._loop.cancel()
        if self._looping is not None:
            await self._looping.wait()

    async def take_over(self, executor_id: str) -> bool:
        held = await anyio.to_thread.run_sync(self.claim, executor_id)
        if held is None:
            return False
        try:
            log.warning("replica %s takes over the runs of dead replica %s", self.executor_id, executor_id)
            for run in await self.settle(executor_id):
                log.warning("took over from replica %s: %s", executor_id, run.describe())
            await anyio.to_thread.run_sync(self.forget, executor_id)
            self.taken_over.append(executor_id)
        finally:
            held.release()
        return True


async def register_queue(config: DurableConfig) -> None:
    """Declare the shared run queue (after launch); the last replica started sets its limits."""
    await DBOS.register_queue_async(RUN_QUEUE, global_concurrency=config.max_runs,
                                    worker_concurrency=config.runs_per_replica,
                                    polling_interval_sec=config.queue_poll, on_conflict="always_update")  # fmt: skip


async def enqueue(run: RunInput) -> None:
    """Put a run on the shared queue under its run id: whichever replica dequeues it first runs it."""
    from dbos import SetWorkflowID

    with SetWorkflowID(run.run_id):
        await DBOS.enqueue_workflow_async(RUN_QUEUE, run_workflow, run)


async def join(
    config: DurableConfig, engine: sa.Engine, lease: ExecutorLease, settle: Callable[[str], Awaitable[Sequence[Any]]]
) -> Replicas:
    """Join the replicas of `config`'s database (after DBOS's launch): our row, the run queue."""
    group = Replicas(config, engine, lease, settle)
    await anyio.to_thread.run_sync(group.register)
    await anyio.to_thread.run_sync(group.rate.create)
    await register_queue(config)
    return group
