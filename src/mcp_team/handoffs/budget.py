"""Run-wide budgets (handoffs, model calls, tokens, cost) and per-specialist circuit breakers.

One `Budget` is shared by every branch of a run. The model-call budget keeps one call in reserve
so a run that runs out can still ask the supervisor for a final synthesis. A call refused for
want of budget raises `BudgetExhausted`; the handoff budget is checked and charged separately
(`can_hand_off`, `charge_handoff`) so a decision about it can be recorded before it is applied.

Tokens are checked before a call with the size of its prompt, so one call never overshoots the
budget by its whole input; only its output (and calls already in flight) can pass the limit, and
then the budget counts as used up. Cost is counted from the calls whose price is known; a call whose cost is
unknown (a model without a price, a server that reports no token counts, a call cut off once sent) cannot be,
and a run with a cost budget says so in its notes (`cost_note`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mcp_team.errors import BudgetExhausted, McpTeamError
from mcp_team.handoffs.schema import Budgets
from mcp_team.llm import Usage
from mcp_team.llm.types import no_usage


class BudgetAboveLimit(McpTeamError, ValueError):
    """An override that would raise a budget its caller may only lower."""

    def __init__(self, name: str, value: float, limit: float) -> None:
        self.name, self.value, self.limit = name, value, limit
        super().__init__(f"{name}={_number(value)} is above the limit of {_number(limit)}")


def merge_budgets(base: Budgets, overrides: Mapping[str, float | None], *, cap: bool = False) -> Budgets:
    """`base` with each override given (None: not given) in place of its value: the one merge the CLI's
    flags and `run_team`'s arguments both go through, so neither drops the budgets it does not name.

    With `cap` (a client's overrides) a budget may be lowered, never raised: `BudgetAboveLimit`. A value
    that is no budget at all (negative, infinite) raises pydantic's `ValidationError`, naming it.
    """
    asked = {name: value for name, value in overrides.items() if value is not None}
    if cap:
        for name, value in asked.items():
            limit = getattr(base, name)
            if limit is not None and value > limit:
                raise BudgetAboveLimit(name, value, limit)
    return Budgets.model_validate({**base.model_dump(), **asked})


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Budget:
    limits: Budgets
    handoffs: int = 0
    model_calls: int = 0
    usage: Usage = field(default_factory=no_usage)
    cost_usd: float = 0.0  # of the calls whose price is known
    unpriced_calls: int = 0  # the calls whose cost is unknown: the cost budget cannot count them
    exhausted: str | None = None  # which budget ran out first, in words, once one has
    fallbacks: list[str] = field(default_factory=list)  # the supervisor's calls a fallback model answered

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

    def before_call(self, input_tokens: int = 0) -> None:
        self.charge_call(reserve=1, input_tokens=input_tokens)

    def after_call(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        if usage.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += usage.cost_usd
        if self.usage.total_tokens >= self.limits.max_tokens:
            self._run_out(self._tokens_used_up())
        if (limit := self.limits.max_cost) is not None and self.cost_usd >= limit:
            self._run_out(self._cost_used_up())

    def used_fallback(self, note: str) -> None:
        self.fallbacks.append(note)

    def cost_note(self) -> str | None:
        """What the run's caller should know of a cost budget that could not count every call; None: nothing."""
        if (limit := self.limits.max_cost) is None or not self.unpriced_calls:
            return None
        calls = f"{self.unpriced_calls} model call{'' if self.unpriced_calls == 1 else 's'}"
        return (
            f"The cost budget (max_cost ${limit:g}) could not count {calls} whose cost is unknown (a model without "
            "a price, a server that reports no token counts, or a call cut off once sent): it counted "
            f"${self.cost_usd:.4f} for the calls it could price, and the run may have cost more. To bound such calls, "
            "set max_model_calls (max_tokens too, where the server reports token counts); a gateway in front of a "
            "priced API is priced when MCP_TEAM_PRICES names its price list."
        )

    def charge_call(self, reserve: int, input_tokens: int = 0) -> None:
        """Count one model call whose prompt is about `input_tokens` long, keeping `reserve` calls back;
        `BudgetExhausted` when no call is left, or the prompt alone would not fit in the tokens left."""
        if self.model_calls >= self.limits.max_model_calls - reserve:
            raise BudgetExhausted(self._run_out(f"the model-call budget ({self.limits.max_model_calls}) was used up"))
        left = self.limits.max_tokens - self.usage.total_tokens
        if left <= 0:
            raise BudgetExhausted(self._run_out(self._tokens_used_up()))
        if input_tokens > left:
            raise BudgetExhausted(
                self._run_out(
                    f"the token budget ({self.limits.max_tokens}) was used up: the next call's prompt alone is "
                    f"about {input_tokens} tokens, {left} are left"
                )
            )
        if (limit := self.limits.max_cost) is not None and self.cost_usd >= limit:
            raise BudgetExhausted(self._run_out(self._cost_used_up()))
        self.model_calls += 1

    def _tokens_used_up(self) -> str:
        return f"the token budget ({self.limits.max_tokens}) was used up"

    def _cost_used_up(self) -> str:
        return f"the cost budget (${self.limits.max_cost:g}) was used up"

    def _run_out(self, what: str) -> str:
        self.exhausted = self.exhausted or what
        return self.exhausted


@dataclass
class FinalCall:
    """The meter for the closing synthesis: it may spend the call the budget held in reserve."""

    budget: Budget

    def before_call(self, input_tokens: int = 0) -> None:
        self.budget.charge_call(reserve=0, input_tokens=input_tokens)

    def after_call(self, usage: Usage) -> None:
        self.budget.after_call(usage)

    def used_fallback(self, note: str) -> None:
        self.budget.used_fallback(note)


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
