"""What can stop a durable run's execution other than its own work: a replay that does not match what was
recorded (`ReplayDiverged`), a step the runs database would not record (`CheckpointFailed`); and a cancel the
runs database refused (`CancelRefused`). The first two are `BaseException`s on purpose: the engine turns a tool's
or a model's `Exception` into an error result for the model, which would let the run go on as if nothing
happened. Light: no DBOS, no SQLAlchemy."""

from __future__ import annotations

from mcp_team.errors import ConfigError


class CheckpointFailed(BaseException):
    """The runs database refused to record a step (a full disk, a lost database): the run cannot go on from memory,
    since a replay would not find the step. The run pauses instead, and resumes from its last recorded step once the
    database takes writes again (runs/execution.py)."""

    def __init__(self, cause: BaseException) -> None:
        from mcp_team.runs.database import reason_of  # only a durable run has a database to refuse

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


class CancelRefused(ConfigError):
    """The run's record says cancelled, but the runs database refused DBOS's half of the cancel (its workflow).
    The message says the cancel did not finish and how to retry it (`retry`, the caller's way to cancel)."""

    def __init__(self, run_id: str, exc: BaseException, retry: str = "Cancel it again") -> None:
        from mcp_team.runs.database import reason_of

        self.run_id, self.cause = run_id, exc
        super().__init__(
            f"run {run_id} is recorded cancelled, but the runs database refused to cancel its workflow "
            f"({reason_of(exc)}), so the cancel did not finish. {retry} once the database is writable"
        )

    def retried_with(self, retry: str) -> CancelRefused:
        """The same error, saying to retry with `retry` (e.g. "Call cancel_run again")."""
        return CancelRefused(self.run_id, self.cause, retry)
