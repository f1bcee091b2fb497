"""`mcp-team run`'s checkpoints: the engine's `Approver` (handoffs/checkpoints.py) as a question on the terminal.

Asked only when stdin is a terminal; otherwise `CannotAsk`, and the team's `checkpoint_policy` decides
(by default the run fails saying nobody could approve). Ctrl-D at the prompt is a reject, as a cancelled form
is in an MCP client: the person was asked, and ended the input. The question goes to stderr, like progress, so
stdout keeps only the answer.

The terminal is read on the event loop (`anyio.wait_readable`), not in a worker thread: a thread blocked in a
read cannot be cancelled, and the process could not exit (after Ctrl-C, or the checkpoint's timeout) until
the person pressed Enter.
"""

from __future__ import annotations

import os
import sys

import anyio

from mcp_team.handoffs.checkpoints import Approver, CannotAsk, Checkpoint, Decision

_CHOICES = {"a": "approve", "approve": "approve", "r": "revise", "revise": "revise", "x": "reject", "reject": "reject"}


WAY_OUT = (
    'Run it on a terminal to answer, or set checkpoint_policy = "approve" in the team file\'s [supervisor] to go '
    "on without asking"
)


def terminal_approver() -> Approver:
    terminal = _Lines()
    # Branches running in parallel can reach their checkpoints at once (`before:` two members of one turn or
    # of independent planned tasks): one terminal, so one question at a time, in the order they came.
    one_at_a_time = anyio.Lock()

    async def approve(checkpoint: Checkpoint) -> Decision:
        if sys.stdin is None or not sys.stdin.isatty():  # None: started with stdin closed (`<&-`, some units)
            raise CannotAsk("mcp-team run is not attached to a terminal (stdin is not interactive)", WAY_OUT)
        async with one_at_a_time:
            again = f" (round {checkpoint.round})" if checkpoint.round > 1 else ""
            print(f"\n── checkpoint {checkpoint.name}{again} ──\n{checkpoint.summary}\n", file=sys.stderr, flush=True)
            try:
                return await _decision(terminal)
            except _TerminalGone:  # its window or ssh session closed: nobody is left to approve anything
                return Decision(action="reject", feedback="the terminal closed at the prompt")
            except EOFError:  # Ctrl-D: the person ended the input, as a client's person cancels a form: a reject
                print(file=sys.stderr, flush=True)
                return Decision(action="reject", feedback="the input ended (Ctrl-D) at the prompt")

    return approve


class _TerminalGone(EOFError):
    """Reading the terminal failed (EIO): its window or ssh session is gone."""


async def _decision(terminal: _Lines) -> Decision:
    while True:
        action = _CHOICES.get((await terminal.ask("[a]pprove, [r]evise or reject ([x])? ")).strip().lower())
        if action is None:
            print("please answer a, r or x", file=sys.stderr, flush=True)
        elif action != "revise":
            return Decision(action=action)  # type: ignore[arg-type]
        elif feedback := (await terminal.ask("what should change? ")).strip():
            return Decision(action="revise", feedback=feedback)
        else:  # a revise round with nothing to change would re-plan (a model call) for nothing
            print("with revise, say what should change; or answer a or x", file=sys.stderr, flush=True)


class _Lines:
    """Lines typed on stdin, read without a thread (see the module docstring); lines typed ahead are kept."""

    def __init__(self) -> None:
        self.pending = b""

    async def ask(self, prompt: str) -> str:
        print(prompt, end="", file=sys.stderr, flush=True)
        try:
            return await self._line()
        except anyio.get_cancelled_exc_class():
            print(file=sys.stderr, flush=True)  # what comes next (the run's end) starts on a line of its own
            raise

    async def _line(self) -> str:
        fd = sys.stdin.fileno()
        while b"\n" not in self.pending:
            await anyio.wait_readable(fd)
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the terminal (its window, the ssh session) is gone
                raise _TerminalGone from None
            if not chunk:  # Ctrl-D
                if not self.pending:
                    raise EOFError
                break
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode(sys.stdin.encoding or "utf-8", errors="replace")
