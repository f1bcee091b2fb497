"""How `run` and `eval` take Ctrl-C and SIGTERM while their work goes on: the first signal cancels the work and
returns, so that the command still says what finished (a run's record, an eval's report); a second Ctrl-C is a
KeyboardInterrupt at once; a second SIGTERM is ignored."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anyio.abc import TaskStatus


async def until_signalled(work: Callable[[], Awaitable[None]]) -> bool:
    """`await work()`, cancelled by Ctrl-C or SIGTERM; True when a signal cut it short.

    Returned, never raised: a second Ctrl-C stops the event loop while this task still unwinds, and asyncio's
    shutdown logs the exception such a task ends with, traceback and all. SIGTERM is taken to the process's end:
    killed by a SIGTERM, the command would leave its work half done (a durable run running, a report unwritten).
    Once the work is over, signalled or not, it is ignored (see the end). The caller puts it back if its process
    goes on (`cli.main` called by another program)."""
    import asyncio
    import signal

    import anyio

    signalled: list[int] = []
    work_scope, sigint_scope = anyio.CancelScope(), anyio.CancelScope()
    loop = asyncio.get_running_loop()

    def stop() -> None:
        work_scope.cancel()
        sigint_scope.cancel()  # a Ctrl-C after a SIGTERM is a second signal too: a KeyboardInterrupt, at once

    def on_sigterm(signum: int, _frame: object) -> None:
        # A plain handler, not a signal receiver: closing one gives SIGTERM its default action (asyncio resets it),
        # and a SIGTERM in the moment before it was ignored killed the command mid-cancel (143). The first cancels
        # the work; later ones wait for what it leaves.
        if not signalled:
            signalled.append(signum)
            with contextlib.suppress(RuntimeError):  # the loop has closed: the work is over already
                loop.call_soon_threadsafe(stop)

    async def cancel_on_sigint(*, task_status: TaskStatus[None]) -> None:
        with sigint_scope, anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                signalled.append(signum)
                stop()
                break
        # Closed: SIGINT is a KeyboardInterrupt again, and a second Ctrl-C ends the command at once.

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        async with anyio.create_task_group() as tg:
            with work_scope:
                # Started, not just scheduled: the work begins only once a signal cancels it. Until then a signal
                # is a KeyboardInterrupt (cli.main), which nothing started yet can be left half-done by.
                await tg.start(cancel_on_sigint)
                await work()
            tg.cancel_scope.cancel()
    finally:
        # Ignored, not handled by `on_sigterm`: nothing is left for it to cancel, and a signal with a handler
        # interrupts the command's write of its answer or report. With PYTHONUNBUFFERED set (as Docker images
        # often set it) stdout writes straight to its file, and the rest of a write the signal cut short, to a
        # pipe whose reader is slower, was lost: the answer cut off, exit 0.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return bool(signalled)
