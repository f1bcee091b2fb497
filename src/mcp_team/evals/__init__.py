"""Record and replay whole runs, and evaluate a team on fixed cases (`mcp-team eval`)."""

from mcp_team.evals.recordings import (
    ReplayOutcome,
    assert_replays,
    comparable,
    record_run,
    replay_recording,
    run_replayed,
)
from mcp_team.llm.replay import Divergence

__all__ = [
    "Divergence",
    "ReplayOutcome",
    "assert_replays",
    "comparable",
    "record_run",
    "replay_recording",
    "run_replayed",
]
