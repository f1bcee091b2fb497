"""The same run service on a real PostgreSQL 15 (started by the test): database created on first start,
a run recorded and read back, executor ids held by advisory locks, kill -9 and resume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcp_team.errors import ConfigError
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine
from support.fan_out_worker import check_branches, kill_after, result_of, start_worker
from support.postgres import postgres_server

pytestmark = [pytest.mark.process, pytest.mark.postgres]


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.mark.anyio
async def test_runs_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    config = resolve(state_dir=tmp_path, database_url=pg_url, executor_id="pg-a", environ={})
    async with open_runs(config, FakeEngine(k=4, steps=2)) as runs:
        record = await runs.wait((await runs.start(RunRequest(request="on postgres", thread="p"))).run_id, timeout=60)
        assert record is not None and record.status == "complete", record
        assert record.result is not None and len(record.result.handoffs) == 4
        from mcp_team.runs.database import open_engine
        from mcp_team.runs.executor import acquire

        db = open_engine(config)
        with pytest.raises(ConfigError, match="already uses executor id 'pg-a'"):
            acquire(config, db)
        db.dispose()
    async with open_runs(config, FakeEngine()) as runs:
        assert [r.status for r in await runs.list(thread="p")] == ["complete"]


@pytest.mark.anyio
async def test_a_closed_server_leaves_its_executor_id_free(tmp_path: Path, pg_url: str) -> None:
    """A heartbeat under way while the server closes must not take the id again after its release (the
    next start with that id would be refused). A 40 ms lease keeps a beat under way nearly all the time."""
    from mcp_team.runs.database import open_engine
    from mcp_team.runs.executor import is_held

    config = resolve(state_dir=tmp_path, database_url=pg_url, executor_id="pg-close",
                     environ={"MCP_TEAM_LEASE_SECONDS": "0.04"})  # fmt: skip
    db = open_engine(config)
    try:
        for _ in range(8):
            async with open_runs(config, FakeEngine()) as runs:
                assert runs.durable is not None and runs.durable.replicas is not None
                await anyio.sleep(0.1)
            assert not is_held(config, db, "pg-close")
    finally:
        db.dispose()


def test_kill_and_resume_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    log = tmp_path / "calls.log"
    env_url = pg_url.replace("mcp_team_runs", "mcp_team_kill")

    def start(mode: str) -> object:
        import os

        os.environ["MCP_TEAM_DATABASE_URL"] = env_url
        try:
            return start_worker(tmp_path, log, mode)
        finally:
            del os.environ["MCP_TEAM_DATABASE_URL"]

    kill_after(start("start"), log, 25)  # type: ignore[arg-type]
    record = result_of(start("resume"))  # type: ignore[arg-type]
    assert record["status"] == "complete", record.get("reason")
    check_branches(record)
