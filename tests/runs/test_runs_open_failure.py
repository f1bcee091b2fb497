"""The runs database failing part-way through opening the run service (after DBOS's launch: a PostgreSQL restart
as the process starts, or a statement the database refuses) is a one-line start-up error, as the other
problems found there are (`Runs.open` promises `ConfigError`, never a traceback). It escaped as the driver's
exception: `mcp-team run` said "unexpected ... please report it", and `serve --http` ended with a traceback from
its lifespan. Made here by a table of ours that another program created with other columns."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from support import HANG_GUARD, MCP_TEAM, clean_env
from support.postgres import Postgres, postgres

pytestmark = [pytest.mark.process, pytest.mark.postgres]


@pytest.fixture
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        yield server


def test_a_database_that_fails_while_the_runs_open_is_one_line(pg: Postgres) -> None:
    admin = sa.create_engine(pg.url("postgres").replace("postgresql://", "postgresql+psycopg://"),
                             isolation_level="AUTOCOMMIT")  # fmt: skip
    with admin.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE mcp_team_runs"))
    admin.dispose()
    runs = sa.create_engine(pg.url().replace("postgresql://", "postgresql+psycopg://"))
    with runs.begin() as conn:
        conn.execute(sa.text("CREATE TABLE mcp_team_replicas (name text)"))  # not the columns replicas write
    runs.dispose()

    # A process of its own: DBOS launches (once a process) before the failure.
    done = subprocess.run([MCP_TEAM, "run", "--model", "offline", "--database-url", pg.url(), "Research bees"],
                          env=clean_env(), capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mcp-team: error: the runs database postgresql"), done.stderr
    assert "failed while it was being opened" in last and "executor_id does not exist" in last, done.stderr
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr
