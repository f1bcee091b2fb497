"""Run-wide budgets (handoffs, model calls, tokens) and per-specialist circuit breakers.

One `Budget` is shared by every branch of a run. The model-call budget keeps one call in reserve
so a run that runs out can still ask the supervisor for a final synthesis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_team.handoffs.schema import Budgets
from mcp_team.llm import ModelError, Usage


@dataclass
class Budget:
    limits: Budgets
    handoffs: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    exhausted: str | None = None  # which budget ran out, in words, once one has

    def take_handoff(self) -> bool:
        """Count one handoff; False (and `exhausted` set) when none is left."""
        if self.handoffs >= self.limits.max_handoffs:
            self.exhausted = self.exhausted or f"the handoff budget ({self.limits.max_handoffs}) was used up"
            return False
        self.handoffs += 1
        return True

    def before_call(self) -> None:
        self.charge_call(reserve=1)

    def after_call(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        if self.usage.total_tokens >= self.limits.max_tokens:
            self.exhausted = self.exhausted or f"the token budget ({self.limits.max_tokens}) was used up"

    def charge_call(self, reserve: int) -> None:
        """Count one model call, keeping `reserve` calls back; `ModelError` when none is left."""
        if self.model_calls >= self.limits.max_model_calls - reserve:
            self.exhausted = self.exhausted or f"the model-call budget ({self.limits.max_model_calls}) was used up"
            raise ModelError("budget_exhausted", self.exhausted)
        if self.usage.total_tokens >= self.limits.max_tokens:
            self.exhausted = self.exhausted or f"the token budget ({self.limits.max_tokens}) was used up"
            raise ModelError("budget_exhausted", self.exhausted)
        self.model_calls += 1


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
    """Per-specialist circuit breakers: `threshold` failures in a row open the circuit for the run."""

    threshold: int
    _streak: dict[str, int] = field(default_factory=dict)

    def is_open(self, specialist: str) -> bool:
        return self._streak.get(specialist, 0) >= self.threshold

    def record(self, specialist: str, ok: bool) -> None:
        self._streak[specialist] = 0 if ok else self._streak.get(specialist, 0) + 1
