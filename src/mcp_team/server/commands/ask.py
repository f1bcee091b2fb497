"""`mcp-team run`'s checkpoints: the engine's `Approver` (handoffs/checkpoints.py) as a question on the terminal.

Asked only when stdin is a terminal; otherwise `CannotAsk`, and the team's `checkpoint_policy` decides
(by default the run fails saying nobody could approve). The question goes to stderr, like progress, so
stdout keeps only the answer.
"""

from __future__ import annotations

import sys

import anyio

from mcp_team.handoffs.checkpoints import Approver, CannotAsk, Checkpoint, Decision

_CHOICES = {"a": "approve", "approve": "approve", "r": "revise", "revise": "revise", "x": "reject", "reject": "reject"}


def terminal_approver() -> Approver:
    async def approve(checkpoint: Checkpoint) -> Decision:
        if not sys.stdin.isatty():
            raise CannotAsk("mcp-team run is not attached to a terminal (stdin is not interactive)")
        again = f" (round {checkpoint.round})" if checkpoint.round > 1 else ""
        print(f"\n── checkpoint {checkpoint.name}{again} ──\n{checkpoint.summary}\n", file=sys.stderr, flush=True)
        while True:
            choice = (await _ask("[a]pprove, [r]evise or reject ([x])? ")).strip().lower()
            if choice in _CHOICES:
                break
            print("please answer a, r or x", file=sys.stderr, flush=True)
        action = _CHOICES[choice]
        feedback = (await _ask("what should change? ")).strip() if action == "revise" else ""
        return Decision(action=action, feedback=feedback)  # type: ignore[arg-type]

    return approve


async def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    if not line:
        raise CannotAsk("the terminal closed before answering")
    return line
