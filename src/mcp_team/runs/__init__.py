"""Runs that survive: the run store and durable execution on DBOS's public API.

Importing this package is cheap (no DBOS, no SQLAlchemy): `open_runs` imports them in a worker thread, so the
server can answer `initialize` first and start durable runs in the background.

Modules: `config` (state dir, database URL, executor id, versions), `database` (connections, SQLite tuning),
`executor` (executor-id leases), `tables` (the runs database's tables, `RunRecord`), `store` (coalesced
writes, reads, subscriptions), `threads` (follow-up history), `serializer` (JSON for DBOS), `branches` (a run's
concurrent branches as child workflows), `runtime` (the engine seam: branches, gather, decide; model and tool
steps), `workflow` (the run workflow and its input), `launch` (start-up checks, DBOS's migrations, launch and
shutdown), `service` (the `Runs` API), `execution` (running a run here and its record), `recovery` (settling
and resuming what a stopped process left), `replicas` (heartbeat, takeover, the shared run queue), `orphans`
(SQLite: a dead process's runs taken over), `shared_limits` (rates shared by replicas), `approvals` (durable
checkpoint answers), `team_engine` (the real `Team` as the engine), `live` (the runs executing here),
`cancels` (cancels across processes and the watch for them), `host` (what `durable` and `workflow` need of
the service, as a protocol).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from mcp_team.runs.config import APP_VERSION, DurableConfig, resolve

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs
    from mcp_team.runs.types import Engine

__all__ = ["APP_VERSION", "DurableConfig", "open_runs", "resolve"]


@asynccontextmanager
async def open_runs(
    config: DurableConfig | None, engine: Engine, *, adopt_orphans: bool = False
) -> AsyncIterator[Runs]:
    """The process's run service, open for the block: durable on `config`'s database, or in memory when None.
    Raises `ConfigError` when it cannot start. A server passes `adopt_orphans`: on SQLite it takes over the runs
    of processes that died (runs/orphans.py)."""
    service = await anyio.to_thread.run_sync(importlib.import_module, "mcp_team.runs.service")
    runs = await service.Runs.open(config, engine)
    async with anyio.create_task_group() as tg:
        runs.serve(tg, adopt_orphans=adopt_orphans)
        try:
            yield runs
        finally:
            with anyio.CancelScope(shield=True):
                await runs.close()
            tg.cancel_scope.cancel()
