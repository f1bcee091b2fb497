"""Human checkpoints in durable runs (issue 13): the answer is a step, and a run waiting for one survives a restart.

The engine asks its `Approver` (handoffs/checkpoints.py) at each checkpoint. A durable run's approver is
`Board.approver`: inside the run workflow it records two steps per question, `checkpoint-asked:<name>:<round>`
(when it was first asked, so the team's `checkpoint_timeout` counts from then, across restarts) and
`checkpoint:<name>:<round>` (the answer). A replay gets the recorded answer and never asks again; a run
that died while waiting has no recorded answer, so after the restart it waits again.

While it waits, the question is on this process's board (`Board.waiting`) and on the run's record (`waiting`,
shown by get_run and team://runs/{id}); whoever answers first wins: the session that started the run (its
elicitation, when it is still attached: `Runs.start(approve=...)`) or anyone calling `answer_checkpoint`.
A session that cannot ask (a client without elicitation) raises `CannotAsk` as before, and the team's
`checkpoint_policy` decides; a run with no session attached (start_run, or resumed after a restart) waits
for `answer_checkpoint` until its deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from dbos import DBOS

from mcp_team.handoffs.checkpoints import Approver, CannotAsk, Checkpoint, Decision, NoAnswer
from mcp_team.runs import _dbos_internals as internals
from mcp_team.runs.runtime import _check_room, _raise_if_diverged

OnWait = Callable[[Checkpoint | None], Awaitable[None]]
"""Told the checkpoint the run waits at now (the longest-waiting of its unanswered ones), or None (to show it
on the run's record)."""


class NotWaiting(LookupError):
    """The run is not waiting at a checkpoint in this process."""


@dataclass
class _Waiting:
    checkpoint: Checkpoint
    answered: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision | None = None


@dataclass
class Board:
    """The checkpoints this process's runs wait at, by run id, oldest first (concurrent branches of one run
    may each wait at a `before:<member>`)."""

    waiting: dict[str, list[_Waiting]] = field(default_factory=dict)

    def answer(self, run_id: str, decision: Decision, name: str | None = None) -> Checkpoint:
        """Answer the oldest checkpoint `run_id` waits at (the one named `name`, when given); `NotWaiting` if none."""
        for entry in self.waiting.get(run_id, []):
            if not entry.answered.is_set() and name in (None, entry.checkpoint.name):
                entry.decision = decision
                entry.answered.set()
                return entry.checkpoint
        raise NotWaiting(run_id)

    def _now_waiting(self, run_id: str) -> Checkpoint | None:
        return next((e.checkpoint for e in self.waiting.get(run_id, []) if not e.answered.is_set()), None)

    def approver(self, run_id: str, session: Approver | None, on_wait: OnWait) -> Approver:
        """The approver of durable run `run_id`: recorded answers, from `session` or `answer`, whichever comes first."""

        async def wait(checkpoint: Checkpoint, asked_at: str) -> dict[str, Any]:
            left = _left(checkpoint, asked_at)
            if left is not None and left <= 0:
                return {"timeout": True}
            entry = _Waiting(checkpoint)
            self.waiting.setdefault(run_id, []).append(entry)
            try:
                await on_wait(self._now_waiting(run_id))
                with anyio.move_on_after(left if left is not None else float("inf")):
                    return await _first_answer(entry, session)
                return {"timeout": True}
            finally:
                entries = self.waiting.get(run_id, [])
                entries.remove(entry)
                if not entries:
                    self.waiting.pop(run_id, None)
                with anyio.CancelScope(shield=True):
                    await on_wait(self._now_waiting(run_id))

        async def approve(checkpoint: Checkpoint) -> Decision:
            key = f"{checkpoint.name}:{checkpoint.round}"
            if internals.in_workflow():
                asked_at = await _step(f"checkpoint-asked:{key}", _now)
                outcome = await _step(f"checkpoint:{key}", wait, checkpoint, asked_at)
            else:
                outcome = await wait(checkpoint, await _now())
            if "cannot" in outcome:  # recorded as a value: a stored exception would come back as another type
                raise CannotAsk(outcome["cannot"])
            if outcome.get("timeout"):
                raise NoAnswer(f"nobody answered checkpoint '{checkpoint.name}' in time")
            return Decision(action=outcome["action"], feedback=outcome.get("feedback", ""))

        return approve


async def _first_answer(entry: _Waiting, session: Approver | None) -> dict[str, Any]:
    """The board's answer or the session's, whichever comes first."""
    outcome: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def from_board() -> None:
            await entry.answered.wait()
            assert entry.decision is not None
            outcome.update(entry.decision.model_dump())
            tg.cancel_scope.cancel()

        async def from_session() -> None:
            assert session is not None
            try:
                decision = await session(entry.checkpoint)
            except CannotAsk as exc:
                outcome["cannot"] = str(exc)
            else:
                outcome.update(decision.model_dump())
            tg.cancel_scope.cancel()

        tg.start_soon(from_board)
        if session is not None:
            tg.start_soon(from_session)
    return outcome


def _left(checkpoint: Checkpoint, asked_at: str) -> float | None:
    if checkpoint.timeout is None:
        return None
    waited = (datetime.now(UTC) - datetime.fromisoformat(asked_at)).total_seconds()
    return checkpoint.timeout - waited


async def _now() -> str:
    return datetime.now(UTC).isoformat()


async def _step(name: str, func: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    _check_room()
    try:
        return await DBOS.run_step_async({"name": name}, func, *args)
    except Exception as exc:
        _raise_if_diverged(exc)
        raise
