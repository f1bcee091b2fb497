"""Run records kept for `team://runs/...`: a small store interface and a bounded in-memory store."""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from mcp_team.handoffs import RunResult

Visible = Callable[[str | None], bool]
"""Whether a run of this owner (the principal who started it; None: nobody in particular) may be shown."""


def _everyone(_owner: str | None) -> bool:
    return True


class RunStore(Protocol):
    def save(self, run: RunResult, owner: str | None = None) -> None: ...

    def get(self, run_id: str, visible: Visible = _everyone) -> RunResult | None: ...

    def recent(self, limit: int = 50, visible: Visible = _everyone) -> list[RunResult]: ...


class MemoryRunStore:
    """Keeps the newest `max_runs` runs; saving a run again (e.g. when it finishes) replaces it.

    Each record is kept as compressed JSON, not as the model it came in as: a record read now and then costs
    little to parse, while 200 records as pydantic objects held about 24 KB each on the offline model (and
    their answers' text on a real one) against about 1 KB compressed."""

    def __init__(self, max_runs: int = 200) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        self.max_runs = max_runs
        self._runs: OrderedDict[str, tuple[str | None, bytes]] = OrderedDict()

    def save(self, run: RunResult, owner: str | None = None) -> None:
        self._runs.pop(run.run_id, None)
        self._runs[run.run_id] = (owner, zlib.compress(run.model_dump_json().encode(), 1))
        while len(self._runs) > self.max_runs:
            self._runs.popitem(last=False)

    def get(self, run_id: str, visible: Visible = _everyone) -> RunResult | None:
        owner, record = self._runs.get(run_id, (None, b""))
        return _load(record) if record and visible(owner) else None

    def recent(self, limit: int = 50, visible: Visible = _everyone) -> list[RunResult]:
        shown = [record for owner, record in reversed(self._runs.values()) if visible(owner)]
        return [_load(record) for record in shown[:limit]]


def _load(record: bytes) -> RunResult:
    return RunResult.model_validate_json(zlib.decompress(record))
