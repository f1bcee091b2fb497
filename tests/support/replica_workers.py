"""Replica processes of replica_worker.py on PostgreSQL (a K-branch fan-out engine each), driven line by line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORKER = Path(__file__).parent / "replica_worker.py"
K, STEPS = 4, 4
LEASE = "10"  # the default; the takeover test shortens it (a short lease on a loaded machine is a flake)


class Replica:
    """A replica subprocess and its command channel."""

    def __init__(self, url: str, executor_id: str, log: Path, latency: float = 0.05, **env: str) -> None:
        environ = {**os.environ, "MCP_TEAM_DATABASE_URL": url, "MCP_TEAM_LEASE_SECONDS": LEASE, **env}
        environ.pop("MCP_TEAM_EXECUTOR_ID", None)
        args = [sys.executable, str(WORKER), executor_id, str(log), str(K), str(STEPS), str(latency)]
        # stderr to a file: DBOS logs a traceback a poll while the database is away, and a full pipe
        # would block the replica on its next log line
        self.err = log.with_name(f"{log.name}.{executor_id}.{time.monotonic_ns()}.err").open("w+")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True, env=environ)  # fmt: skip
        assert self.proc.stdout is not None
        self.first = self.proc.stdout.readline().strip()
        self.pending: list[dict[str, Any]] = []

    @property
    def ready(self) -> bool:
        return self.first.startswith("READY ")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self, cmd: str) -> dict[str, Any]:
        """The next answer to `cmd` (answers to other commands are kept for later)."""
        for i, got in enumerate(self.pending):
            if got["cmd"] == cmd:
                return self.pending.pop(i)
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"replica exited; stderr:\n{self.stderr()}"
            got = json.loads(line)
            if got["cmd"] == cmd:
                return got
            self.pending.append(got)

    def ask(self, line: str) -> dict[str, Any]:
        self.send(line)
        return self.answer(line.split()[0])

    def stderr(self) -> str:
        self.kill()
        self.err.seek(0)
        return self.err.read()[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def quit(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
