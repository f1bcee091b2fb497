"""Where a test's worker process sits when it does not end: `kill -USR1` writes every thread's stack to its stderr
(even with its event loop stuck), `kill -USR2` every asyncio task's (what each awaits). `install()` in the worker;
`communicate_or_stacks` in the test."""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import subprocess
import sys
import time


def install() -> None:
    """Call from the worker's event loop."""
    faulthandler.register(signal.SIGUSR1)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _tasks)


def _tasks() -> None:
    for task in asyncio.all_tasks():
        print(f"--- {task.get_name()}: {task.get_coro()}", file=sys.stderr)
        task.print_stack(limit=12, file=sys.stderr)
    sys.stderr.flush()


def communicate_or_stacks(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """`proc.communicate(timeout=...)`; on a timeout, the process's stacks (`install`) and its output in the
    assertion message, the process killed."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # threads first: once its event loop is closed (a worker stuck in its exit), SIGUSR2 ends the process
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.send_signal(signal.SIGUSR2)
        time.sleep(1)
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"the worker did not end within {timeout:g} s; stdout:\n{out[-2000:]}\nstderr, with its "
            f"stacks:\n{err[-30000:]}"
        ) from None
