"""An idle server on SQLite stays idle: DBOS's background jobs (delayed workflows, workflow timeouts: mcp-team
uses neither) ran every second, two SQL statements each time, over a third of an idle server's CPU. They run once a
minute there now; on PostgreSQL DBOS's own pace is kept (the jobs' lock is a transaction held for the interval)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from dbos import _workflow_commands
from dbos._dbos import _get_dbos_instance

from durable_engine import FakeEngine
from mcp_team.runs import _dbos_internals as internals
from mcp_team.runs import open_runs, resolve

pytestmark = pytest.mark.anyio


async def test_an_idle_sqlite_service_runs_dbos_background_jobs_once_a_minute_not_every_second(tmp_path: Path) -> None:
    async with open_runs(resolve(state_dir=tmp_path, environ={}), FakeEngine()):
        sys_db = _get_dbos_instance()._sys_db
        passes: list[None] = []
        jobs = sys_db.transition_delayed_workflows  # the first of the jobs, on every pass

        def counted() -> None:
            passes.append(None)
            jobs()

        sys_db.transition_delayed_workflows = counted  # type: ignore[method-assign]
        await anyio.sleep(3.5)  # every second, this would see three passes or four
    # The first pass runs at launch (maybe just after the counter was put in place); the next a minute later.
    assert len(passes) <= 1, f"{len(passes)} passes of DBOS's background jobs in 3.5 s"


def test_the_background_jobs_keep_dbos_pace_for_a_database_opened_after() -> None:
    own = _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC
    try:
        internals.space_background_jobs(60.0)
        assert _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC == 60.0
        internals.space_background_jobs(None)  # what launch asks for PostgreSQL
        assert _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC == 1.0  # DBOS 3.4.0's own
    finally:
        _workflow_commands._BACKGROUND_JOBS_INTERVAL_SEC = own
