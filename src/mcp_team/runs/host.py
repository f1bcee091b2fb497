"""What the durable side (`durable`) and the run workflow (`workflow`) need of the run service they serve (`Runs`,
runs/service.py), as a protocol: the service owns them, and they call back into it without importing it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcp_team.handoffs import RunResult
    from mcp_team.runs.live import Live
    from mcp_team.runs.types import RunInput


class Answers(Protocol):
    """Of the checkpoint board (runs/approvals.py `Board`), what the durable side sets: where answers posted by
    other replicas come in (a `runs.approvals.Inbox`; named loosely, as approvals imports the runtime)."""

    inbox: Any


class RunHost(Protocol):
    @property
    def checkpoints(self) -> Answers:
        """The checkpoints this process's runs wait at."""
        ...

    @property
    def live(self) -> Mapping[str, Live]:
        """The runs executing in this process, by id."""
        ...

    @property
    def running(self) -> int:
        """Runs executing in this process now."""
        ...

    async def is_over(self, run_id: str) -> bool:
        """Whether the run's record is final."""
        ...

    async def execute(self, run: RunInput, *, durable: bool) -> RunResult:
        """Run `run` here (the run workflow's body)."""
        ...
