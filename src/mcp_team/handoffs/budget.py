"""Run-wide budgets (handoffs, model calls, tokens) and per-specialist circuit breakers.

One `Budget` is shared by every branch of a run. The model-call budget keeps one call in reserve
so a run that runs out can still ask the supervisor for a final synthesis. A call refused for
want of budget raises `BudgetExhausted`; the handoff budget is checked and charged separately
(`can_hand_off`, `charge_handoff`) so a decision about it can be recorded before it is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.schema import Budgets
from mcp_team.llm import Usage


@dataclass
class Budget:
    limits: Budgets
    handoffs: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    exhausted: str | None = None  # which budget ran out first, in words, once one has

    @property
    def handoffs_left(self) -> int:
        return max(self.limits.max_handoffs - self.handoffs, 0)

    def can_hand_off(self) -> bool:
        return self.handoffs < self.limits.max_handoffs

    def charge_handoff(self) -> None:
        self.handoffs += 1

    def handoffs_used_up(self) -> str:
        """Record that the handoff budget ran out; which budget ran out first, in words."""
        return self._run_out(f"the handoff budget ({self.limits.max_handoffs}) was used up")

    def before_call(self) -> None:
        self.charge_call(reserve=1)

    def after_call(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        if self.usage.total_tokens >= self.limits.max_tokens:
            self._run_out(f"the token budget ({self.limits.max_tokens}) was used up")

    def charge_call(self, reserve: int) -> None:
        """Count one model call, keeping `reserve` calls back; `BudgetExhausted` when none is left."""
        if self.model_calls >= self.limits.max_model_calls - reserve:
            raise BudgetExhausted(self._run_out(f"the model-call budget ({self.limits.max_model_calls}) was used up"))
        if self.usage.total_tokens >= self.limits.max_tokens:
            raise BudgetExhausted(self._run_out(f"the token budget ({self.limits.max_tokens}) was used up"))
        self.model_calls += 1

    def _run_out(self, what: str) -> str:
        self.exhausted = self.exhausted or what
        return self.exhausted


@dataclass
class FinalCall:
    """The meter for the closing synthesis: it may spend the call the budget held in reserve."""

    budget: Budget

    def before_call(self) -> None:
        self.budget.charge_call(reserve=0)

    def after_call(self, usage: Usage) -> None:
        self.budget.after_call(usage)


@dataclass
class Breakers:
    """Per-specialist circuit breakers: `threshold` failures in a row open the circuit for the run.

    Outcomes count as they happen, so a retry sees a circuit its siblings opened. Where branches
    ran at once, `settle` recounts their outcomes in handoff order, so the state the next step
    starts from does not depend on which branch happened to finish first.
    """

    threshold: int
    _streak: dict[str, int] = field(default_factory=dict)

    def is_open(self, specialist: str) -> bool:
        return self._streak.get(specialist, 0) >= self.threshold

    def record(self, specialist: str, ok: bool) -> None:
        self._streak[specialist] = 0 if ok else self._streak.get(specialist, 0) + 1

    def snapshot(self) -> dict[str, int]:
        return dict(self._streak)

    def settle(self, before: Mapping[str, int], outcomes: Iterable[tuple[str, bool]]) -> None:
        """Recount from the `before` snapshot with `outcomes` (specialist, ok) in handoff order."""
        touched = set()
        streak = dict(before)
        for specialist, ok in outcomes:
            touched.add(specialist)
            streak[specialist] = 0 if ok else streak.get(specialist, 0) + 1
        for specialist in touched:
            self._streak[specialist] = streak[specialist]
