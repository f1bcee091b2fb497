"""The tools' annotations say what the loaded team may do: a client may skip asking its user before a tool
marked read-only, so `run_team`, `start_run` and each specialist's tool are read-only only when every tool
behind them only reads, and destructive when one may delete or overwrite (MCP's defaults for a tool of another
server that does not say). Through an MCP client, on both protocol revisions."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team_file
from support import ECHO_MCP_SERVER_FILE, HANG_GUARD, free_port

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"]),
    pytest.mark.process,
]

READER = """
[[specialists]]
name = "reader"
description = "Reads the team's notes."
prompt = "Read the notes."
tools = ["read_notes", "calculate"]
"""
NOTE_TAKER = """
[[specialists]]
name = "scribe"
description = "Keeps notes."
prompt = "Write a note."
tools = ["write_note"]
"""
ADDER = """
[[specialists]]
name = "adder"
description = "Adds with the echo server's add (annotated read-only by its server)."
prompt = "Add."
tools = ["echo/add"]
"""
ECHOER = """
[[specialists]]
name = "echoer"
description = "Calls the echo server's echo, which says nothing of what it does."
prompt = "Echo."
tools = ["echo/echo"]
"""
READ_ONLY = (True, False)  # (readOnlyHint, destructiveHint)
WRITES = (False, False)
MAY_DESTROY = (False, True)


async def effects(client: Client, also: tuple[str, ...] = ()) -> dict[str, tuple[bool | None, bool | None]]:
    """What each tool says it may do, but the run tools', which say the same on every team (start_run: as run_team
    does, so it is left out too unless asked for in `also`)."""
    tools = (await client.list_tools()).tools
    fixed = {"plan_team", "get_run", "cancel_run", "answer_checkpoint", "start_run"} - set(also)
    return {
        t.name: (t.annotations.read_only_hint, t.annotations.destructive_hint)
        for t in tools
        if t.annotations is not None and t.name not in fixed
    }


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    """The test MCP server (an `add` annotated read-only, an `echo` that says nothing) over streamable HTTP, as a
    team file's server entry: one process for the module, where each team served below would start a stdio
    process of its own (a second of imports each). Its tools say the same on either transport."""
    for _ in range(3):  # another process may take the port first: then the server exits, and a new port is tried
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, ECHO_MCP_SERVER_FILE, "--http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _listening(port, proc):
            break
        proc.kill()
        proc.wait(timeout=HANG_GUARD)
    else:
        raise RuntimeError("the echo MCP server did not start over HTTP")
    try:
        yield f'[[mcp_servers]]\nname = "echo"\nurl = "http://127.0.0.1:{port}/mcp"\nallowed_tools = ["add", "echo"]\n'
    finally:
        proc.terminate()
        proc.wait(timeout=HANG_GUARD)


def _listening(port: int, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + HANG_GUARD
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def team_server(tmp_path: Path, body: str, **kwargs: Any) -> Any:
    path = tmp_path / "team.toml"
    path.write_text(f'[tools]\nnotes_file = "{tmp_path / "notes.jsonl"}"\n' + body, encoding="utf-8")
    return build_server(ModelSettings(model="offline"), load_team_file(path), **kwargs), path


async def test_the_default_team_only_reads(mode: str) -> None:
    async with Client(build_server(ModelSettings(model="offline")), mode=mode) as client:
        seen = await effects(client)
    assert seen["run_team"] == READ_ONLY
    assert {seen[s] for s in ("researcher", "analyst", "writer", "coder", "reviewer")} == {READ_ONLY}


async def test_a_specialist_that_writes_notes_makes_the_team_write(mode: str, tmp_path: Path) -> None:
    server, _ = team_server(tmp_path, READER + NOTE_TAKER)
    async with Client(server, mode=mode) as client:
        seen = await effects(client)
    assert seen == {"reader": READ_ONLY, "scribe": WRITES, "run_team": WRITES}


async def test_another_servers_tools_are_taken_at_their_word_and_its_silence_as_mcps_defaults(
    mode: str, tmp_path: Path, echo_server: str
) -> None:
    server, _ = team_server(tmp_path, echo_server + ADDER)
    async with Client(server, mode=mode) as client:
        only_add = await effects(client)
    server, _ = team_server(tmp_path, echo_server + ADDER + ECHOER)
    async with Client(server, mode=mode) as client:
        with_echo = await effects(client)
    assert only_add == {"adder": READ_ONLY, "run_team": READ_ONLY}
    assert with_echo == {"adder": READ_ONLY, "echoer": MAY_DESTROY, "run_team": MAY_DESTROY}


async def test_a_reloaded_team_changes_what_run_team_and_start_run_say(mode: str, tmp_path: Path) -> None:
    server, path = team_server(tmp_path, READER, watch=True)
    async with Client(server, mode=mode, cache=None) as client:
        before = await effects(client)
        path.write_text(path.read_text(encoding="utf-8") + NOTE_TAKER, encoding="utf-8")
        with anyio.fail_after(HANG_GUARD):
            while "scribe" not in (after := await effects(client)):  # noqa: ASYNC110 (polls the listing)
                await anyio.sleep(0.05)
    assert before == {"reader": READ_ONLY, "run_team": READ_ONLY}
    assert after == {"reader": READ_ONLY, "scribe": WRITES, "run_team": WRITES}


async def test_a_team_inside_the_team_counts_with_what_its_members_may_do(mode: str, tmp_path: Path) -> None:
    inner = NOTE_TAKER.replace("[[specialists]]", "[[specialists.team.specialists]]")
    desk = '[[specialists]]\nname = "desk"\ndescription = "A team that keeps notes."\n' + inner
    server, _ = team_server(tmp_path, READER + desk)
    async with Client(server, mode=mode) as client:
        seen = await effects(client)
    assert seen == {"reader": READ_ONLY, "desk": WRITES, "run_team": WRITES}


async def test_start_run_follows_the_team_on_a_durable_server(mode: str, tmp_path: Path) -> None:
    from mcp_team.runs.config import resolve

    server, _ = team_server(tmp_path, READER + NOTE_TAKER, durable=resolve(state_dir=tmp_path / "state"))
    async with Client(server, mode=mode) as client:
        seen = await effects(client, also=("start_run",))
        listed = {t.name for t in (await client.list_tools()).tools}
    assert "start_run" in listed, listed
    assert seen["start_run"] == seen["run_team"] == WRITES
