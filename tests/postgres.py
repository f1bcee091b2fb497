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


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields a URL for the superuser `postgres` (trust auth on 127.0.0.1); stops and removes it after."""
    if not (BIN / "initdb").exists():
        raise RuntimeError(f"PostgreSQL 15 is not installed ({BIN}); apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="mcp-team-pg-"))
    data, port = root / "data", _free_port()
    user = None
    if os.geteuid() == 0:
        user = "postgres" if _has_user("postgres") else "nobody"
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)

    def run(*args: str) -> None:
        cmd = [*args] if user is None else ["runuser", "-u", user, "--", *args]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    try:
        run(str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        run(str(BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60", "start",
            "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off")  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/mcp_team_runs"
    finally:
        if (data / "postmaster.pid").exists():
            run(str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
