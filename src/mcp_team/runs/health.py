"""Whether a server can go on (`Liveness`) and whether its runs database takes writes now (`probe_write`).

A part the server cannot serve without that dies (the run service's background work, the lifespan's task
group, the runs database deleted or replaced under it) calls `Liveness.fail`: the reason is logged in one line,
the transport is told to stop, and the process exits 1 so that a supervisor (systemd, Kubernetes, Docker's
restart policy) starts it again, never left half alive answering 500 while its health check says 200. If the
stop itself hangs (a writer stuck on a lock), the process exits anyway after `EXIT_GRACE` seconds.

`probe_write` is the readiness check: one small write to the runs database on a connection of its own, bounded
by `READY_WAIT` seconds (SQLite's busy handler, PostgreSQL's lock and statement timeouts), so that `/readyz`
fails while the database cannot be written, and passes again once it can.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger("mcp_team.server")

EXIT_DIED = 1
EXIT_GRACE = 15.0  # seconds a stop after a failure gets before the process just exits
READY_WAIT = 3.0  # seconds the readiness write may wait on a lock


@dataclass
class Liveness:
    """Whether the server is whole; `fail` once a part it needs has died."""

    dead: str | None = None
    _stops: list[Callable[[], None]] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.dead is None

    def on_death(self, stop: Callable[[], None]) -> None:
        """Call `stop` (on the event loop) when the server dies: the transport's way to end serving."""
        self._stops.append(stop)

    def fail(self, reason: str) -> None:
        """Say why the server cannot go on, stop it, and make sure the process exits `EXIT_DIED`."""
        if self.dead is not None:
            return
        self.dead = reason
        log.critical("%s; stopping (exit %d) so that a supervisor starts it again", reason, EXIT_DIED)
        for stop in self._stops:
            try:
                stop()
            except Exception:  # one transport's stop must not keep the others from theirs
                log.exception("stopping after a failure")
        threading.Thread(target=_exit_later, name="mcp-team-exit", daemon=True).start()


def described(exc: BaseException) -> str:
    """An error in one line, as its driver said it: the one error inside task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    from mcp_team.runs.database import reason_of  # SQLAlchemy: only once something failed

    return f"{type(exc).__name__}: {reason_of(exc)}"


def _exit_later() -> None:
    time.sleep(EXIT_GRACE)
    print(f"mcp-team: still stopping {EXIT_GRACE:g} s after a failure; exiting now", file=sys.stderr, flush=True)
    os._exit(EXIT_DIED)


def probe_write(url: str, sqlite_path: Path | None) -> str | None:
    """None when the runs database took a small write within `READY_WAIT` seconds, else why not (blocking: call
    it in a thread). A row of the store's own meta table is written, on a connection of its own."""
    wait = READY_WAIT
    if sqlite_path is not None:
        if not sqlite_path.exists():
            return f"the runs database {sqlite_path} is gone"
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(sqlite_path))}?mode=rw", uri=True, timeout=wait, isolation_level=None
            )
        except sqlite3.Error as exc:
            return f"the runs database {sqlite_path} cannot be opened: {exc}"
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR REPLACE INTO mcp_team_meta (key, value) VALUES ('ready_probe', ?)",
                         (str(time.time()),))  # fmt: skip
            conn.execute("COMMIT")
            return None
        except sqlite3.Error as exc:
            return f"the runs database {sqlite_path} cannot be written within {wait:g} s: {exc}"
        finally:
            conn.close()
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool,
                              connect_args={"connect_timeout": max(1, int(wait)),
                                            "options": f"-c lock_timeout={int(wait * 1000)} "
                                                       f"-c statement_timeout={int(wait * 1000)}"})  # fmt: skip
    try:
        with engine.begin() as pg:
            pg.execute(
                sa.text(
                    "INSERT INTO mcp_team_meta (key, value) VALUES ('ready_probe', :v) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
                ),
                {"v": str(time.time())},
            )
        return None
    except sa.exc.SQLAlchemyError as exc:
        from mcp_team.runs.database import reason_of

        return f"the runs database cannot be written within {wait:g} s: {reason_of(exc)}"
    finally:
        engine.dispose()
