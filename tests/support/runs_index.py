"""The run store's `updated_at` index: its name, the indexes a database has, and a database made before it."""

from __future__ import annotations

import sqlalchemy as sa

from mcp_team.runs import open_runs
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import open_engine
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine

INDEX = "mcp_team_runs_updated"


async def opened_on_an_older_database(config: DurableConfig) -> None:
    """Open runs on a database as a version without the index left it (its tables made, the index not), then
    once more, as this version's next start does."""
    async with open_runs(config, FakeEngine()) as runs:
        record = await runs.wait((await runs.start(RunRequest(request="before the index"))).run_id, timeout=60)
        assert record is not None and record.status == "complete", record
    db = open_engine(config)
    try:
        with db.begin() as conn:
            conn.execute(sa.text(f"DROP INDEX {INDEX}"))
        assert INDEX not in indexes(db)
    finally:
        db.dispose()
    async with open_runs(config, FakeEngine()) as runs:
        assert [r.request for r in await runs.list()] == ["before the index"]  # nothing lost


def indexes(db: sa.Engine) -> dict[str | None, list[str | None]]:
    with db.connect() as conn:
        return {i["name"]: i["column_names"] for i in sa.inspect(conn).get_indexes("mcp_team_runs")}
