"""Runs a dead process left on a SQLite database, taken over by a live server.

Several processes may share one SQLite state directory (two stdio servers started by two clients get
executor ids `<host>-0` and `<host>-1`). Each holds its id's lock file (executor.py) while it lives. When one
dies, its unfinished runs would wait for the next process to take its id; a live server does not wait for
that: every `POLL` seconds it takes the lock of each id nobody holds (so a process starting with that id
waits, as for a replica's takeover) and settles the id's runs as a restart would (runs/recovery.py: the ones that
can go on resume in this process, from their last recorded steps), and lets the id go. PostgreSQL replicas do
this with leases instead (replicas.py).

Only a server adopts (`open_runs(..., adopt_orphans=True)`): `mcp-team run` runs its own request and exits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import sqlalchemy as sa

from mcp_team.runs.config import DurableConfig
from mcp_team.runs.executor import ExecutorLease, lock_dir, try_acquire

log = logging.getLogger(__name__)

POLL = 10.0  # seconds between looks for ids nobody holds


class Adopter:
    """The loop that takes over dead processes' runs; `stop` ends it before the service closes."""

    def __init__(
        self, config: DurableConfig, engine: sa.Engine, own: str, settle: Callable[[str], Awaitable[Sequence[Any]]]
    ):
        self.config, self.engine, self.own, self.settle = config, engine, own, settle
        self._scope = anyio.CancelScope()
        self._ended: anyio.Event | None = None  # set once `run` has ended; None before it starts

    async def run(self) -> None:
        """Take over the runs of dead processes until `stop` (the first look at once)."""
        self._ended = anyio.Event()
        try:
            with self._scope:
                while True:
                    for lease in await anyio.to_thread.run_sync(_free_ids, self.config, self.engine, self.own):
                        try:
                            await self._take_over(lease.executor_id)
                        finally:
                            lease.release()
                    await anyio.sleep(POLL)
        finally:
            self._ended.set()

    async def _take_over(self, executor_id: str) -> None:
        try:
            settled = await self.settle(executor_id)
            for run in settled:
                log.warning("took over from the stopped process %s: %s", executor_id, run.describe())
        except sa.exc.SQLAlchemyError as exc:
            log.warning("could not take over the runs of %s (%s); retrying", executor_id, exc)

    async def stop(self) -> None:
        """End the loop, waiting for a takeover under way (DBOS must still be there)."""
        self._scope.cancel()
        if self._ended is not None:
            await self._ended.wait()


def _free_ids(config: DurableConfig, engine: sa.Engine, own: str) -> list[ExecutorLease]:
    """The leases of every other executor id with a lock file and no live process holding it (blocking)."""
    leases = []
    for path in sorted(lock_dir(config).glob("*.lock")):
        if path.stem != own and (lease := try_acquire(config, engine, path.stem)) is not None:
            leases.append(lease)
    return leases
