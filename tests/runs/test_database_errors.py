"""An operator's database URL with the wrong user, or a user the runs tables refuse, on a real PostgreSQL: each
is one line naming what PostgreSQL said. A role that does not exist was reported as a database that "does
not exist ... and could not be created" (the database was there), and `mcp-team runs` as a user without
privileges on the tables printed SQLAlchemy's several lines (the statement, a link) as an "unexpected" error."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here
from support.postgres import Postgres, postgres

pytestmark = [pytest.mark.process, pytest.mark.postgres]


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        # a run makes the database and its tables (in a process of its own: DBOS is a process's)
        made = subprocess.run([MCP_TEAM, "run", "--model", "offline", "--database-url", server.url(), "Research bees"],
                              env=clean_env(), capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
        assert made.returncode == 0, made.stderr
        engine = sa.create_engine(server.url().replace("postgresql://", "postgresql+psycopg://"))
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE ROLE outsider LOGIN"))  # may connect, not read the runs tables
        engine.dispose()
        yield server


def _one_line(said: str) -> str:
    lines = said.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcp-team: error: "), said
    assert "unexpected" not in said and "[SQL:" not in said and "Traceback" not in said, said
    return lines[0]


@pytest.mark.parametrize("command", [("runs",), ("runs", "show", "abc"), ("runs", "cancel", "abc")])
def test_a_user_that_does_not_exist_is_named_not_the_database(pg: Postgres, command: tuple[str, ...]) -> None:
    url = pg.url().replace("postgres@", "nosuch@")
    done = cli_here(*command, "--database-url", url)
    line = _one_line(done.stderr)
    assert done.returncode == 2
    assert 'role "nosuch" does not exist' in line, line
    assert "could not be created" not in line, line


@pytest.mark.parametrize("command", [("runs",), ("runs", "show", "abc"), ("runs", "cancel", "abc")])
def test_a_user_the_runs_tables_refuse_gets_one_line(pg: Postgres, command: tuple[str, ...]) -> None:
    url = pg.url().replace("postgres@", "outsider@")
    done = cli_here(*command, "--database-url", url)
    line = _one_line(done.stderr)
    assert done.returncode == 2
    assert "permission denied for table" in line and "grant" in line, line


def test_a_database_that_does_not_exist_is_still_created(pg: Postgres) -> None:
    done = cli_here("runs", "--database-url", pg.url("made_on_first_use"))
    assert done.returncode == 0, done.stderr
    assert "no runs in" in done.stderr
