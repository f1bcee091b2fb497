"""Readiness that tells the truth on PostgreSQL (a real `mcp-team serve --http` on a throwaway PostgreSQL 15):
`/readyz` fails while the runs tables are locked by another session and while PostgreSQL is down, saying why,
and passes again once they are back; `/healthz` stays 200 throughout (the process is whole: restarting it would
not help), reads of a finished run are answered while the lock is held, and runs go on after."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from support import HANG_GUARD, MCP_TEAM, clean_env, free_port, plain_http, wait_healthy
from support.postgres import postgres
from support.sync_client import Mcp, until

pytestmark = [pytest.mark.process, pytest.mark.postgres]


def test_readiness_follows_a_locked_or_stopped_postgresql_and_liveness_stays(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with postgres() as pg:
        url = pg.url("faults")
        port = free_port()
        env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_DATABASE_URL=url)
        proc = subprocess.Popen([MCP_TEAM, "serve", "--http", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=log.open("wb"))  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            assert wait_healthy(base, proc), log.read_text()
            http = plain_http(timeout=HANG_GUARD)
            client = Mcp(base)
            done = client.call("start_run", request="Research bees")["run_id"]
            assert client.call("get_run", run_id=done, wait_seconds=50)["status"] == "complete"
            until("ready", lambda: http.get(f"{base}/readyz").status_code == 200, proc, log)

            # Another session holds the store's tables: the probe's write waits, then says so.
            locker = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
            with locker.connect() as conn:
                conn.execute(sa.text("LOCK TABLE mcp_team_meta IN ACCESS EXCLUSIVE MODE"))
                failing = lambda: (r := http.get(f"{base}/readyz")).status_code == 503 and r  # noqa: E731
                unready = until("/readyz failing on the lock", failing, proc, log)
                assert "cannot be written within 3 s" in unready.json()["error"], unready.json()
                assert http.get(f"{base}/healthz").status_code == 200
                assert client.call("get_run", run_id=done)["status"] == "complete"  # reads go on
                conn.rollback()
            locker.dispose()
            until("/readyz passing again", lambda: http.get(f"{base}/readyz").status_code == 200, proc, log)

            pg.stop()  # PostgreSQL away
            down = until("/readyz failing with PostgreSQL down",
                         lambda: (r := http.get(f"{base}/readyz")).status_code == 503 and r, proc, log)  # fmt: skip
            assert "cannot be written" in down.json()["error"], down.json()
            assert http.get(f"{base}/healthz").status_code == 200 and proc.poll() is None
            pg.start()
            until("/readyz passing once PostgreSQL is back", lambda: http.get(f"{base}/readyz").status_code == 200,
                  proc, log)  # fmt: skip
            after = client.call("start_run", request="Research ants")["run_id"]
            assert client.call("get_run", run_id=after, wait_seconds=50)["status"] == "complete"
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(timeout=HANG_GUARD)
