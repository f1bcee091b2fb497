"""A throwaway PostgreSQL 15 server for tests: initdb + pg_ctl on a temporary directory and a free port.

PostgreSQL refuses to run as root, so as root (CI) the server runs as the `postgres` user (or `nobody`).
The Debian package `postgresql` provides the binaries (.ci/run installs it when missing).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """A running throwaway server: `url` for the database `mcp_team_runs`; `stop` and `start` again on
    the same port and data (for tests of a database that goes away mid-run)."""

    def __init__(self, root: Path, port: int, user: str | None) -> None:
        self.root, self.data, self.port, self.user = root, root / "data", port, user

    def url(self, database: str = "mcp_team_runs") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        cmd = [*args] if self.user is None else ["runuser", "-u", self.user, "--", *args]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "start",
                  "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off")  # fmt: skip

    def stop(self) -> None:
        """Stop at once, as a crash would (connections cut, no checkpoint)."""
        if (self.data / "postmaster.pid").exists():
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL 15 server (superuser `postgres`, trust auth on 127.0.0.1); stopped and removed after."""
    if not (BIN / "initdb").exists():
        raise RuntimeError(f"PostgreSQL 15 is not installed ({BIN}); apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="mcp-team-pg-"))
    user = None
    if os.geteuid() == 0:
        user = "postgres" if _has_user("postgres") else "nobody"
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = Postgres(root, _free_port(), user)
    try:
        server._run(str(BIN / "initdb"), "-D", str(server.data), "-U", "postgres", "-A", "trust", "--no-sync")
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields a URL for the superuser `postgres` (trust auth on 127.0.0.1); stops and removes it after."""
    with postgres() as server:
        yield server.url()


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
