"""PostgreSQL away for a while under a running `mcp-team serve --http`: the server's log says so in a few lines,
each one line, not DBOS's three-line warning from each of its polling threads about every second (a 12 s
outage wrote 140 lines: the queue lister, the background-jobs lock, the notification listener and its
connection retries), and the server serves runs again once the database is back."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HANG_GUARD, clean_env, plain_http, serve_http_process
from support.postgres import Postgres, postgres

pytestmark = [pytest.mark.process, pytest.mark.postgres]

OUTAGE = 6.0  # seconds: DBOS's threads poll about once a second each, so several times over this
DBOS_LINE = re.compile(r"^\d\d:\d\d:\d\d \[ *WARNING\] \(dbos:[^)]*\) ([^:]+)")


@pytest.fixture
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        yield server


def test_a_database_outage_is_said_in_a_few_single_lines(pg: Postgres, tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_DATABASE_URL=pg.url(), MCP_TEAM_EXECUTOR_ID="ops")
    err = tmp_path / "serve.err"
    with serve_http_process(env=env, stderr=err) as (base, _), plain_http(timeout=HANG_GUARD) as http:
        # Its runs (and DBOS) are open: the replica has renewed its lease once, which it does only once the run
        # service opened (its row alone is written part-way through opening: an outage then is another test's).
        _until(lambda: "ops" in _renewed_replicas(pg), "the server's replica renewing its lease")
        pg.stop()
        time.sleep(OUTAGE)
        pg.start()
        assert http.get(f"{base}/healthz").status_code == 200
        time.sleep(2)  # DBOS's threads find the database again
    said = err.read_text()
    lines = said.splitlines()
    assert not [line for line in lines if line.startswith(("\t", "(Background on this error"))], said
    kinds = Counter(m.group(1) for line in lines if (m := DBOS_LINE.match(line)))
    assert kinds, said  # the outage is said
    assert all(n <= 1 for n in kinds.values()), kinds  # once a kind within 30 s


def _renewed_replicas(pg: Postgres) -> str:
    """The replicas that have renewed their lease at least once."""
    import sqlalchemy as sa

    engine = sa.create_engine(pg.url().replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("mcp_team_replicas"):
                return ""
            query = "SELECT executor_id FROM mcp_team_replicas WHERE heartbeat_at > started_at"
            return " ".join(str(r[0]) for r in conn.execute(sa.text(query)))
    finally:
        engine.dispose()


def _until(ready: object, what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.2)
