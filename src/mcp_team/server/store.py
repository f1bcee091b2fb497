"""Run records kept for `team://runs/...`: a small store interface and a bounded in-memory store."""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from mcp_team.handoffs import RunResult


class RunStore(Protocol):
    def save(self, run: RunResult) -> None: ...

    def get(self, run_id: str) -> RunResult | None: ...

    def recent(self, limit: int = 50) -> list[RunResult]: ...


class MemoryRunStore:
    """Keeps the newest `max_runs` runs; saving a run again (e.g. when it finishes) replaces it."""

    def __init__(self, max_runs: int = 200) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        self.max_runs = max_runs
        self._runs: OrderedDict[str, RunResult] = OrderedDict()

    def save(self, run: RunResult) -> None:
        self._runs.pop(run.run_id, None)
        self._runs[run.run_id] = run
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)

    def get(self, run_id: str) -> RunResult | None:
        return self._runs.get(run_id)

    def recent(self, limit: int = 50) -> list[RunResult]:
        return list(reversed(self._runs.values()))[:limit]
