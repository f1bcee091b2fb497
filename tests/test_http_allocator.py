"""`mcp-team serve --http` runs on glibc's malloc (it gives a burst's memory back; see cli/serve.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import httpx2
import pytest

from mcp_team.cli.serve import HTTP_ALLOCATOR, relaunch_on_malloc
from support import clean_env, serve_http_process


def environ(pid: int) -> dict[str, str]:
    """The environment `pid` was started (or re-executed) with. glibc splits GLIBC_TUNABLES in place while
    it parses it (each ':' becomes a NUL): its pieces are joined back."""
    env: dict[str, str] = {}
    for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0"):
        if item.startswith("glibc.") and "GLIBC_TUNABLES" in env:
            env["GLIBC_TUNABLES"] += f":{item}"
        elif "=" in item:
            key, value = item.split("=", 1)
            env[key] = value
    return env


def test_a_served_http_process_relaunches_itself_on_malloc_and_serves() -> None:
    with serve_http_process(env=clean_env(MCP_TEAM_MODEL="offline")) as (base, proc):
        env = environ(proc.pid)  # the same pid: the process re-executed itself, it did not spawn a child
        assert {k: env.get(k) for k in HTTP_ALLOCATOR} == HTTP_ALLOCATOR
        assert httpx2.get(f"{base}/healthz", timeout=5).status_code == 200


def test_the_users_allocator_and_tunables_are_kept() -> None:
    with serve_http_process(env=clean_env(MCP_TEAM_MODEL="offline", PYTHONMALLOC="pymalloc")) as (_, proc):
        env = environ(proc.pid)
        assert env["PYTHONMALLOC"] == "pymalloc"
        assert "GLIBC_TUNABLES" not in env
    mine = "glibc.malloc.trim_threshold=131072"
    with serve_http_process(env=clean_env(MCP_TEAM_MODEL="offline", GLIBC_TUNABLES=mine)) as (_, proc):
        env = environ(proc.pid)
        assert env["PYTHONMALLOC"] == "malloc"
        assert env["GLIBC_TUNABLES"] == f"{mine}:{HTTP_ALLOCATOR['GLIBC_TUNABLES']}"


def test_a_process_that_called_main_with_its_own_arguments_is_never_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    execs: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: execs.append((path, argv, env)))
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    relaunch_on_malloc(argparse.Namespace(http=True, relaunchable=False))  # `main(argv)`: a caller's process
    relaunch_on_malloc(argparse.Namespace(http=True))  # a Namespace made without `main`
    relaunch_on_malloc(argparse.Namespace(http=False, relaunchable=True))  # stdio: left alone
    assert execs == []
    relaunch_on_malloc(argparse.Namespace(http=True, relaunchable=True))  # the command's own process
    [(path, argv, env)] = execs
    assert (path, argv) == (sys.executable, [sys.executable, *sys.orig_argv[1:]])
    assert {k: env[k] for k in HTTP_ALLOCATOR} == HTTP_ALLOCATOR
