"""How `run` and `eval` take Ctrl-C and SIGTERM while their work goes on: the first signal cancels the work and
returns, so that the command still says what finished (a run's record, an eval's report). While the work winds
down, a `run` first records its run cancelled (in the runs database: nothing resumes it later); a second signal
meanwhile is ignored (said once), so two quick Ctrl-C never leave a run half cancelled. Once the cancel is
recorded (`hold` says so), a second Ctrl-C does the caller's `at_once`: `run` ends its process at once
(`exit_now`), `eval` kills the team's external MCP servers (the slow part of winding down: one that ignores its
stdin closing and SIGTERM takes seconds) and reports what finished. A second SIGTERM is ignored.

Not a KeyboardInterrupt raised wherever the second signal lands, as it was: under load one landed in a task of
the MCP SDK's teardown and the tasks waiting on it never ended (the command hung), and one that landed in
SQLAlchemy's pool was logged with a traceback. A caller's process that is not the command's own (`main` called by
a test) gives no `at_once` and still gets the KeyboardInterrupt."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn


def exit_now() -> NoReturn:
    """End the command's own process now, as a second Ctrl-C asks once the run's cancel is recorded: the team's
    external MCP servers killed (nothing would stop them after it), one line said, exit 130. The run's trace may
    miss its last spans; its record is whole."""
    from mcp_team.cli.common import EXIT_CANCELLED
    from mcp_team.server.children import kill_child_groups

    kill_child_groups()
    os.write(2, b"mcp-team: cancelled\n")  # not sys.stderr: the signal may have cut one of its writes short
    os._exit(EXIT_CANCELLED)


async def until_signalled(
    work: Callable[[], Awaitable[None]],
    hold: Callable[[], bool] | None = None,
    at_once: Callable[[], None] | None = None,
) -> bool:
    """`await work()`, cancelled by Ctrl-C or SIGTERM; True when a signal cut it short. `hold()`: whether a second
    signal must wait (the work is recording its cancel). `at_once()`: what a second Ctrl-C does then (None: raise
    KeyboardInterrupt, for a process that is not the command's own).

    Returned, never raised: a second Ctrl-C stops the event loop while this task still unwinds, and asyncio's
    shutdown logs the exception such a task ends with, traceback and all. Both signals get plain handlers for the
    whole work (never Python's default, which raises KeyboardInterrupt wherever the loop happens to be: inside a
    database call of the cancel, it was "an unexpected KeyboardInterrupt" and the cancel was lost). SIGTERM is
    taken to the process's end: killed by a SIGTERM, the command would leave its work half done (a durable run
    running, a report unwritten). Once the work is over, signalled or not, SIGTERM is ignored (see the end); the
    caller puts it back if its process goes on (`cli.main` called by another program)."""
    import asyncio
    import signal

    import anyio

    signalled: list[int] = []
    said: list[bool] = []
    work_scope = anyio.CancelScope()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)
        if len(signalled) == 1:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the work is over already
                loop.call_soon_threadsafe(work_scope.cancel)
            return
        if signum == signal.SIGINT and not (hold is not None and hold()):
            if at_once is None:
                raise KeyboardInterrupt  # a second Ctrl-C, nothing left to record: end at once
            at_once()
            return
        if not said:
            said.append(True)
            print("mcp-team: cancelling (recording the run's end); a moment", file=sys.stderr, flush=True)

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        with work_scope:
            await work()
    finally:
        # SIGTERM ignored, not handled: nothing is left for it to cancel, and a signal with a handler interrupts the
        # command's write of its answer or report. With PYTHONUNBUFFERED set (as Docker images often set it) stdout
        # writes straight to its file, and the rest of a write the signal cut short, to a pipe whose reader is
        # slower, was lost: the answer cut off, exit 0. Ctrl-C is a KeyboardInterrupt again (exit 130).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, before if callable(before) else signal.default_int_handler)
    return bool(signalled)
