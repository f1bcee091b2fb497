"""`mcp-team serve --http` replicas in subprocesses (their offline model calls logged), and MCP clients of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types
from mcp import Client

from support import HANG_GUARD, clean_env, free_port, wait_healthy

LAUNCHER = str(Path(__file__).parent / "logged_serve.py")
K = 4
# A K=4 fan-out: w1 calls its calculator before answering (two model calls), the others answer at once, so
# w1 is still running when the others have finished.
TEAM = "\n".join(
    f'[[specialists]]\nname = "w{i}"\ndescription = "Worker {i}."\nprompt = "You are worker {i}."\n'
    + ('tools = ["calculate"]\n' if i == 1 else "")
    for i in range(1, K + 1)
)
REQUEST = "Each of you: compute 6*7 and report."


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    url: str  # the MCP endpoint
    stderr: IO[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=HANG_GUARD)

    def output(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]


@contextmanager
def replica(name: str, database: str, tmp_path: Path, team_text: str = TEAM, **env: str) -> Iterator[Replica]:
    """`mcp-team serve --http --team team.toml` (through logged_serve.py, which logs every offline model call
    to tmp_path/calls.log) with executor id `name` and `env`; yields it once /healthz answers, stops it after."""
    team = tmp_path / "team.toml"
    team.write_text(team_text, encoding="utf-8")
    environ = clean_env(MCP_TEAM_DATABASE_URL=database, MCP_TEAM_EXECUTOR_ID=name,
                        MCP_TEAM_TEST_CALL_LOG=str(tmp_path / "calls.log"), **env)  # fmt: skip
    failures: list[str] = []
    for _ in range(3):  # another process may take the free port before the child binds it
        port = free_port()
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen([sys.executable, LAUNCHER, "serve", "--http", "--port", str(port), "--team",
                                     str(team)], env=environ, stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
            r = Replica(name, proc, f"http://127.0.0.1:{port}/mcp", stderr)
            if wait_healthy(f"http://127.0.0.1:{port}", proc):
                try:
                    yield r
                finally:
                    if proc.poll() is None:
                        proc.terminate()
                        try:
                            proc.wait(timeout=HANG_GUARD)
                        except subprocess.TimeoutExpired:
                            r.kill()
                return
            r.kill()
            failures.append(r.output())
        if "address already in use" not in failures[-1]:
            break
    raise RuntimeError(f"replica {name} did not start:\n" + "\n---\n".join(failures))


@asynccontextmanager
async def connect(r: Replica, **kwargs: Any) -> AsyncIterator[Client]:
    """An MCP client (2025-11-25, which has `resources/subscribe`) on `r`, once its run service is open
    (reading team://runs waits for it: the replica has joined the others in the database)."""
    async with Client(r.url, mode="legacy", cache=None, **kwargs) as client:
        await runs_of(client)
        yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def runs_of(client: Client) -> list[dict[str, Any]]:
    contents = (await client.read_resource("team://runs")).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return list(json.loads(contents.text)["runs"])


def calls(tmp_path: Path, about: str = "") -> list[dict[str, Any]]:
    """The model calls logged, those whose task names `about` (a run's expression: each call names its run's)."""
    log = tmp_path / "calls.log"
    logged = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in logged if about in c["task"]]


# Between polls of `until`. Most polls are MCP calls, each work for this process and for a replica (which reads
# the database to answer): polled every 50 ms, they were a fifth of this module's CPU. Every wait is for
# something seconds apart (model calls of a second or more), so a quarter of a second is soon enough.
POLL = 0.25


async def until(what: str, done: Callable[[], Any], *replicas: Replica) -> Any:
    """Poll `done` (sync or async) every `POLL` s until it returns something true; a replica exiting fails at
    once."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        value = done()
        if hasattr(value, "__await__"):
            value = await value
        if value:
            return value
        for r in replicas:
            assert r.proc.poll() is None, f"replica {r.name} exited while waiting for {what}:\n{r.output()}"
        assert time.monotonic() < deadline, f"hang guard: still waiting for {what}"
        await anyio.sleep(POLL)
