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

With replicas, a run may wait on another replica than the one a person's `answer_checkpoint` reaches (a
started run goes on the shared queue). That replica posts the answer in the shared database
(`post_answer`, the checkpoint the run's record shows as waiting); the replica running the run takes it
(`Board.inbox`, polled every `INBOX_POLL` seconds while a checkpoint waits) and answers its board; the poster
waits until it is taken, or withdraws it and says so: an answer is either given or refused, never left lying.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio

from mcp_team.handoffs.checkpoints import Approver, CannotAsk, Checkpoint, Decision, NoAnswer

OnWait = Callable[[Checkpoint | None], Awaitable[None]]
"""Told the checkpoint the run waits at now (the longest-waiting of its unanswered ones), or None (to show it
on the run's record)."""
Inbox = Callable[[str, Checkpoint], Awaitable[Decision]]
"""Returns the answer to run `run_id`'s checkpoint once another replica has posted one."""


class NotWaiting(LookupError):
    """The run is not waiting at a checkpoint that can be answered from here; `reason`, when there is more to say
    than the run's record does (it waits on another replica, which did not take the answer)."""

    def __init__(self, run_id: str, reason: str | None = None) -> None:
        super().__init__(run_id)
        self.reason = reason


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
    inbox: Inbox | None = None  # with replicas: answers posted by the others (`inbox_of`)
    _changes: dict[str, anyio.Event] = field(default_factory=dict)

    def changed(self, run_id: str) -> anyio.Event:
        """Set when `run_id` next waits at a checkpoint here, or its execution here ends (`ended`)."""
        return self._changes.setdefault(run_id, anyio.Event())

    def ended(self, run_id: str) -> None:
        """`run_id`'s execution in this process ended: whoever waits for it to wait at a checkpoint is told."""
        self._tell(run_id)

    def _tell(self, run_id: str) -> None:
        if (event := self._changes.pop(run_id, None)) is not None:
            event.set()

    def answer(self, run_id: str, decision: Decision, name: str | None = None, round_: int | None = None) -> Checkpoint:
        """Answer the oldest checkpoint `run_id` waits at (the one named `name`, in round `round_`, when given);
        `NotWaiting` if none."""
        for entry in self.waiting.get(run_id, []):
            at = entry.checkpoint
            if not entry.answered.is_set() and name in (None, at.name) and round_ in (None, at.round):
                entry.decision = decision
                entry.answered.set()
                return entry.checkpoint
        raise NotWaiting(run_id)

    def _now_waiting(self, run_id: str) -> Checkpoint | None:
        return next((e.checkpoint for e in self.waiting.get(run_id, []) if not e.answered.is_set()), None)

    def approver(self, run_id: str, session: Approver | None, on_wait: OnWait, *, durable: bool = True) -> Approver:
        """The approver of run `run_id`: answers from `session` or `answer`, whichever comes first; recorded as steps
        of the run's workflow when `durable`."""

        async def wait(checkpoint: Checkpoint, asked_at: str) -> dict[str, Any]:
            left = _left(checkpoint, asked_at)
            if left is not None and left <= 0:
                return {"timeout": True}
            entry = _Waiting(checkpoint)
            self.waiting.setdefault(run_id, []).append(entry)
            self._tell(run_id)  # it waits now: whoever waited for that is told (`changed`)
            try:
                await on_wait(self._now_waiting(run_id))
                with anyio.move_on_after(left if left is not None else float("inf")):
                    return await _first_answer(run_id, entry, session, self.inbox)
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
            if durable:
                from mcp_team.runs.runtime import step  # a durable run's: DBOS is loaded

                asked_at = await step(f"checkpoint-asked:{key}", _now)
                outcome = await step(f"checkpoint:{key}", wait, checkpoint, asked_at)
            else:
                outcome = await wait(checkpoint, await _now())
            if "cannot" in outcome:  # recorded as a value: a stored exception would come back as another type
                raise CannotAsk(outcome["cannot"], outcome.get("how", ""))
            if outcome.get("timeout"):
                raise NoAnswer(f"nobody answered checkpoint '{checkpoint.name}' in time")
            return Decision(action=outcome["action"], feedback=outcome.get("feedback", ""))

        return approve


async def _first_answer(run_id: str, entry: _Waiting, session: Approver | None, inbox: Inbox | None) -> dict[str, Any]:
    """The board's answer, the session's or the inbox's, whichever comes first."""
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
                outcome.update(cannot=str(exc), how=exc.how)
            else:
                outcome.update(decision.model_dump())
            tg.cancel_scope.cancel()

        async def from_inbox() -> None:
            assert inbox is not None
            outcome.update((await inbox(run_id, entry.checkpoint)).model_dump())
            tg.cancel_scope.cancel()

        tg.start_soon(from_board)
        if session is not None:
            tg.start_soon(from_session)
        if inbox is not None:
            tg.start_soon(from_inbox)
    return outcome


def _left(checkpoint: Checkpoint, asked_at: str) -> float | None:
    if checkpoint.timeout is None:
        return None
    waited = (datetime.now(UTC) - datetime.fromisoformat(asked_at)).total_seconds()
    return checkpoint.timeout - waited


async def _now() -> str:
    return datetime.now(UTC).isoformat()
