"""Exiting at once (`exit_now`), killing the team's external MCP servers first (`kill_child_groups`).

The SDK's stdio client starts each external MCP server as the leader of its own process group (a new
session), and on a normal stop closes its stdin, then signals that group. An exit at once (`os._exit` after a
second signal or a stop that cannot finish; `run`'s second Ctrl-C, whose KeyboardInterrupt has asyncio's
shutdown cancel the teardown) skips that, and a server that ignores its stdin closing was left running as an
orphan. The SDK keeps its processes private, so they are found as what it makes them: this process's children
that lead their own group. Nothing else of mcp-team starts child processes (the HTTP re-execution for malloc
is this same process; uvicorn's and the engine's workers are threads).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable


def exit_now(before_exit: Callable[[], None] | None = None) -> None:
    """End the process at once, exit 0: the external MCP servers killed, then `before_exit` (the spans' flush,
    bounded), then the standard streams flushed. What else was still closing is left as a crash leaves it."""
    kill_child_groups()
    if before_exit is not None:
        before_exit()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def kill_child_groups() -> None:
    """SIGKILL the process group of each child of this process that leads its own group: the process was asked
    to stop now, and nothing would stop them after it. Linux only: elsewhere (macOS) `os` cannot list a
    process's children, and spawning `ps` on a path meant to end at once is left undone; they stay as before."""
    if sys.platform != "linux":
        return
    for leader in _group_leading_children():
        # Gone (ESRCH) or not ours to signal (EPERM: a setuid server): nothing more can be done.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)


def _group_leading_children() -> list[int]:
    """Pids of this process's children whose process group is their own, read from /proc/<pid>/stat."""
    me, leaders = os.getpid(), []
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:  # no /proc mounted
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                line = stat.read()
        except OSError:  # exited meanwhile, or hidden
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so read after its last ')'.
        fields = line[line.rfind(b")") + 1 :].split()
        if len(fields) >= 3 and int(fields[1]) == me and int(fields[2]) == int(name):
            leaders.append(int(name))
    return leaders


def quiet_closed_loop() -> None:
    """Silence what asyncio says once its event loop is closed under child processes killed at exit: its child
    watcher thread logs "Loop ... that handles pid ... is closed" as each one dies, and each one's transport, once
    freed, fails to schedule its close ("Exception ignored ... RuntimeError: Event loop is closed", a traceback).
    The process is ending and the servers are gone: neither says anything a user can act on. For a process that
    exits normally after its loop (`run`'s second Ctrl-C); an `os._exit` leaves its threads no time to say it."""
    logging.getLogger("asyncio").disabled = True
    unraisable_hook = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not (isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed"):
            unraisable_hook(unraisable)

    sys.unraisablehook = hook
