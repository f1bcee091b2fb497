"""A run's record while it runs, and how it ends: what the run service writes to the store for a run of
this process, and recovery for the runs a stopped one left."""

from __future__ import annotations

from collections.abc import Callable

from mcp_team.handoffs import HandoffRecord, RunEvent, RunResult, UsageReport
from mcp_team.handoffs.checkpoints import CheckpointRecord
from mcp_team.handoffs.synthesis import fallback_answer
from mcp_team.runs.types import RunRecord, RunState, now

NOT_RESUMABLE = (
    "the process running it stopped; a run on the client's model (sampling) cannot resume. Finished handoffs are kept"
)


# What a run's answer says when it ended before the engine handed over its result (cancelled as it started, or
# while the engine wound down under load; found running with no process left): then the finished results follow.
_ENDED: dict[str, str] = {
    "cancelled": "The run was cancelled.",
    "failed": "The run failed.",
    "interrupted": "The run was interrupted.",
}


class Progress:
    """A run's record as it runs: handoffs upserted by id (so a replay never shrinks it), written coalesced."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self.handoffs: dict[str, HandoffRecord] = {h.id: h for h in (record.result.handoffs if record.result else [])}
        # A resumed run replays its finished handoffs in milliseconds, from their recorded steps: each is kept as it
        # was recorded (the times it really ran at, and a team's sub-run with its own), by id; a sub-run's handoffs
        # by their path (`<team's handoff id>/<id>`, as its progress names them), at any depth.
        self._done: dict[str, HandoffRecord] = {}
        for h in self.handoffs.values():
            if h.ended_at is not None:
                self._done[h.id] = h
                self._done.update(_nested(h))
        # Finished handoffs being written, not yet shown (`storing`): every record written carries them, so a write
        # of another concurrent end never stores the run without one that is about to be shown finished.
        self._storing: dict[str, HandoffRecord] = {}
        self._usage: Callable[[], UsageReport] | None = None  # the run's spend so far, from its events
        # the answers at its checkpoints so far: a person sees what they answered while the run asks again
        self.checkpoints: list[CheckpointRecord] = list(record.result.checkpoints) if record.result else []
        self.trace_id: str | None = record.result.trace_id if record.result else None

    def on_event(self, event: RunEvent) -> None:
        if event.usage is not None:
            self._usage = event.usage
        if event.record is not None and (handoff := self._kept(event.record)) is not None:
            self.handoffs[handoff.id] = handoff
            self._storing.pop(handoff.id, None)
        if event.kind == "checkpoint" and event.snapshot is not None:  # rare: a whole snapshot is fine
            self.checkpoints = event.snapshot().checkpoints
        elif event.kind == "run_started" and event.snapshot is not None:  # once: the run's trace, from its start
            self.trace_id = event.snapshot().trace_id

    def storing(self, event: RunEvent) -> RunRecord:
        """The record to write before anyone is told of `event` (a finished handoff). From now on every record written
        carries its handoff (`snapshot`); readers are shown it once `on_event` applies it, after the write."""
        if event.record is not None and (handoff := self._kept(event.record)) is not None:
            self._storing[handoff.id] = handoff
        return self.snapshot()

    def _kept(self, handoff: HandoffRecord) -> HandoffRecord | None:
        """`handoff` as the record keeps it: a resumed run replays its finished handoffs from their recorded steps,
        so their stored records stay, and the replay's start of one never shows it running again (None)."""
        if handoff.id in self._done and handoff.ended_at is None:
            return None
        return self._as_done(handoff.model_copy())

    def _as_done(self, handoff: HandoffRecord, path: str = "") -> HandoffRecord:
        """`handoff` (at `path` in the run's tree of sub-runs) as it was recorded when it finished before a restart;
        a team's sub-run replayed with the handoffs it had finished as they were recorded."""
        if handoff.ended_at is not None and (done := self._done.get(path + handoff.id)) is not None:
            # named as `handoff` is: the progress shows a sub-run's handoff by its path, its result in the sub-run
            same = (done.id, done.target) == (handoff.id, handoff.target)
            return done if same else done.model_copy(update={"id": handoff.id, "target": handoff.target})
        sub = handoff.subrun
        if sub is None or not self._done:
            return handoff
        inner = [self._as_done(h, f"{path}{handoff.id}/") for h in sub.handoffs]
        return handoff.model_copy(update={"subrun": sub.model_copy(update={"handoffs": inner})})

    def snapshot(self) -> RunRecord:
        """The record to store: with the finished handoffs being written (`storing`)."""
        return self._snapshot({**self.handoffs, **self._storing} if self._storing else self.handoffs)

    def shown(self) -> RunRecord:
        """The record to show: what is stored already, never a handoff whose end is still being written."""
        return self._snapshot(self.handoffs)

    def _snapshot(self, handoffs: dict[str, HandoffRecord]) -> RunRecord:
        r = self.record
        if r.finished:  # a late progress event never turns a final record back into a running one
            return r
        partial = RunResult(
            answer="", status="running", handoffs=list(handoffs.values()), failures=[],
            usage=self._usage() if self._usage is not None else UsageReport(),
            run_id=r.run_id, trace_id=self.trace_id, request=r.request, mode=r.mode or "adaptive",  # type: ignore[arg-type]
            started_at=r.started_at, checkpoints=list(self.checkpoints),
        )  # fmt: skip
        return r.model_copy(update={"updated_at": now(), "result": partial})

    def finish(self, status: RunState, result: RunResult | None = None, reason: str | None = None) -> RunRecord:
        if result is None:
            result = self.snapshot().result
            assert result is not None
            handoffs = [
                h.model_copy(update={"status": "cancelled", "error_type": status, "error": reason})
                if h.status == "running"
                else h
                for h in result.handoffs
            ]
            update: dict[str, object] = {"handoffs": handoffs, "ended_at": now()}
            if status in ("failed", "cancelled"):  # not left "running" in the result a client reads
                update.update(status=status, stopped_by=result.stopped_by or reason)
            if not result.answer and status in _ENDED:  # ended before the engine gave its result: said, not ""
                update["answer"] = f"{_ENDED[status]} {fallback_answer(handoffs)}"
            result = result.model_copy(update=update)
        elif self._done:
            result = result.model_copy(update={"handoffs": [self._as_done(h) for h in result.handoffs]})
        self.record = self.record.model_copy(
            update={"status": status, "result": result, "reason": reason, "updated_at": now(), "waiting": None}
        )
        return self.record


def _nested(handoff: HandoffRecord, path: str = "") -> dict[str, HandoffRecord]:
    """The finished handoffs of `handoff`'s sub-run (a member that is a team), by path, at any depth."""
    found: dict[str, HandoffRecord] = {}
    prefix = f"{path}{handoff.id}/"
    for h in handoff.subrun.handoffs if handoff.subrun is not None else []:
        if h.ended_at is not None:
            found[prefix + h.id] = h
        found.update(_nested(h, prefix))
    return found


def final_state(result: RunResult) -> RunState:
    """The record's status for a run that returned `result` (one that returned still running failed)."""
    return "failed" if result.status == "running" else result.status
