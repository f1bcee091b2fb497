"""What can stop a durable run's execution other than its own work: a replay that does not match what was recorded,
and a step the runs database would not record. Both are `BaseException`s on purpose: the engine turns a tool's or a
model's `Exception` into an error result for the model, which would let the run go on as if nothing happened."""

from __future__ import annotations

from mcp_team.runs.database import reason_of


class CheckpointFailed(BaseException):
    """The runs database refused to record a step (a full disk, a lost database): the run cannot go on from memory,
    since a replay would not find the step. The run pauses instead, and resumes from its last recorded step once the
    database takes writes again (runs/execution.py)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(reason_of(cause))
        self.cause = cause


class ReplayDiverged(BaseException):
    """A replay asked for a step other than the one recorded: the run cannot resume and is interrupted."""


class BranchesDiverged(ReplayDiverged):
    """A replay started a branch other than the one recorded at that point: the run cannot resume."""


_DIVERGED = ("DBOSUnexpectedStepError", "DBOSStepNondeterminismError")


def raise_if_diverged(exc: Exception) -> None:
    if type(exc).__name__ in _DIVERGED:
        raise ReplayDiverged(str(exc)) from exc
