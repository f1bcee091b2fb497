"""Run-wide budgets (handoffs, model calls, tokens, cost) and per-specialist circuit breakers.

One `Budget` is shared by every branch of a run. The handoff budget is checked and charged separately
(`can_hand_off`, `charge_handoff`) so a decision about it can be recorded before it is applied.

The token and cost budgets are caps. A model call is admitted (`before_call`) only if what it may use, its
prompt's size estimate plus its output limit (`max_tokens`) and the price of both, fits what is left, counting
the calls in flight at their most; otherwise it has its `max_tokens` lowered to what fits (beside calls in
flight, to no less than a quarter of it: else it waits for them to end, as they hold their most and use far
less), or, when not even `MIN_OUTPUT_TOKENS` fit, it is refused (`BudgetExhausted`) and the run winds down. A
call's reservation is replaced by what it really used once it ends.

So the tokens and cost used exceed a budget only by what a call's prompt really took beyond its estimate
(`llm.limits.estimate_input_tokens`): each call that ends teaches the budget how far its estimates fall short
(`prompt_ratio`), and later calls are counted that much larger. The closing answer is admitted alone, against
what is really left, so a run ends past its budget by the closing call's error at most, as long as the errors
of the calls before it fit in what was kept for it.

The closing answer is budgeted from the start: every call but the closing one leaves `closing_tokens` (a quarter
of the token budget, at most `CLOSING_TOKENS`) and the price of as many output tokens (at most a quarter of the
cost budget) for it, and the model-call budget keeps one call for it.

Cost is counted from the calls whose price is known; a call whose cost is unknown (a model without a price, a
server that reports no token counts, a call cut off once sent) cannot be, and a run with a cost budget says so
in its notes (`cost_note`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import anyio

from mcp_team.errors import BudgetExhausted, McpTeamError
from mcp_team.handoffs.schema import Budgets
from mcp_team.llm import Usage
from mcp_team.llm.call import CallNeed, MeterWrapper, Price
from mcp_team.llm.limits import MIN_OUTPUT_TOKENS
from mcp_team.llm.types import no_usage

CLOSING_SHARE = 4  # the closing answer's part of the token and cost budgets: a quarter, at most...
CLOSING_TOKENS = 8_192  # ...this many tokens (a synthesis prompt and its answer)
FAIR_SHARE = 4  # beside calls in flight, a call is lowered to no less than this part of its output limit; else it waits
MAX_PROMPT_RATIO = 2.0  # how far the prompt estimates are scaled up at most (a server's odd count is not trusted)
CALIBRATED_FROM = 256  # the smallest prompt estimate a ratio is learned from: a fixed overhead (a provider's own
# tool-use prompt) would swell a small prompt's ratio, and every later estimate with it


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


class Reservation:
    """What one admitted call holds in each budget it is charged to, until it ends (`release`). A plain class
    with slots: one is made on every model call."""

    __slots__ = ("budgets", "cost", "estimate", "max_tokens", "released", "tokens")

    def __init__(self, max_tokens: int, tokens: int, cost: float, budgets: tuple[Budget, ...], estimate: int) -> None:
        self.max_tokens = max_tokens  # the call's output limit: what was asked, or lower to fit
        self.tokens = tokens  # its prompt (scaled by `prompt_ratio`) plus `max_tokens`
        self.cost = cost  # the most it may cost; 0 when its price is unknown
        self.budgets = budgets
        self.estimate = estimate  # its prompt's estimate as made (`CallNeed.prompt_tokens`)
        self.released = False

    def release(self, used: Usage | None = None) -> None:
        """The call ended having used `used` (charged already; None: unknown): free what it held, and learn how
        far its prompt's estimate fell short. Once; later calls do nothing."""
        if self.released:
            return
        self.released = True
        learned = used is not None and self.estimate >= CALIBRATED_FROM and used.input_tokens > self.estimate
        for budget in self.budgets:
            budget.reserved_tokens -= self.tokens
            budget.reserved_cost -= self.cost
            budget.in_flight -= 1
            if learned:
                assert used is not None
                budget.prompt_ratio = min(max(budget.prompt_ratio, used.input_tokens / self.estimate), MAX_PROMPT_RATIO)
        self.budgets[-1].changed()


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
    reserved_tokens: int = 0  # what the calls in flight may still use, at most
    reserved_cost: float = 0.0
    in_flight: int = 0
    prompt_ratio: float = 1.0  # the most a call's prompt took over its estimate, as a factor: later ones are scaled
    lowered: list[int] = field(default_factory=list)  # the output limits of calls lowered to fit
    notes: dict[str, str] = field(default_factory=dict)  # about the run's calls, by topic: the first of each kept
    waits: dict[str, list[float]] = field(default_factory=dict)  # seconds calls waited, by rate limit in words
    on_wait: Callable[[str], Awaitable[None]] | None = field(default=None, repr=False)  # tells the run's progress
    _change: anyio.Event | None = field(default=None, repr=False)
    closing_tokens: int = field(init=False, default=0)  # the tokens kept for the closing answer
    tokens_used: int = field(init=False, default=0)  # `usage.total_tokens`, kept as a plain int

    def __post_init__(self) -> None:
        self.closing_tokens = min(self.limits.max_tokens // CLOSING_SHARE, CLOSING_TOKENS)

    def closing_cost(self, price: Price) -> float:
        """The cost kept for the closing answer: `closing_tokens` at `price`'s output rate, at most a quarter."""
        assert self.limits.max_cost is not None
        most = price(0, self.closing_tokens)
        share = self.limits.max_cost / CLOSING_SHARE
        return share if most is None else min(most, share)

    @property
    def chain(self) -> tuple[Budget, ...]:
        """The budgets a call is charged to: this one (and, for a sub-run's, its parents'; see `subteam`)."""
        return (self,)

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

    async def before_call(self, need: CallNeed, *, closing: bool = False) -> Reservation:
        """Admit a call that needs `need`, in every budget of `chain` (this one's the closing call's when
        `closing`: it may spend what was kept for it). While the call does not fit and calls are in flight, it
        waits for them (or, if a fair share fits, is lowered to that); then it is lowered to fit, or refused with
        `BudgetExhausted`. On every model call: no more work than that."""
        chain = self.chain
        estimate = need.prompt_tokens
        if len(chain) == 1 and self.limits.max_cost is None and self.model_calls < self.limits.max_model_calls - 1:
            # The common case, on every model call: one budget, no cost budget, calls left, and the call fits whole.
            prompt = math.ceil(estimate * self.prompt_ratio)
            left = self.limits.max_tokens - self.tokens_used - self.reserved_tokens - prompt
            if left - (0 if closing else self.closing_tokens) >= need.max_tokens:
                return self._reserve(chain, need, prompt, need.max_tokens, estimate)
        while True:
            ratio = self.prompt_ratio if len(chain) == 1 else max(b.prompt_ratio for b in chain)
            prompt = math.ceil(estimate * ratio) if ratio != 1.0 else estimate
            fits = need.max_tokens
            for n, budget in enumerate(chain):
                last_one = closing and n == 0
                budget.check_calls(reserve=0 if last_one else 1)
                fits = min(fits, budget.output_that_fits(prompt, need, closing=last_one))
            if fits >= need.max_tokens:
                return self._reserve(chain, need, prompt, need.max_tokens, estimate)
            busy = any(b.in_flight for b in chain)
            if busy and fits < max(MIN_OUTPUT_TOKENS, need.max_tokens // FAIR_SHARE):
                await chain[-1].wait_for_change()  # calls in flight hold their most: wait for what they really use
                continue
            if fits >= min(MIN_OUTPUT_TOKENS, need.max_tokens):
                for budget in chain:
                    budget.lowered.append(fits)
                return self._reserve(chain, need, prompt, fits, estimate)
            culprit = min(chain, key=lambda b: b.output_that_fits(prompt, need, closing=closing and b is self))
            raise BudgetExhausted(culprit._run_out(culprit._too_little(prompt, need, closing and culprit is self)))

    def check_calls(self, reserve: int) -> None:
        """`BudgetExhausted` when no model call is left, keeping `reserve` calls back."""
        if self.model_calls >= self.limits.max_model_calls - reserve:
            raise BudgetExhausted(self._run_out(f"the model-call budget ({self.limits.max_model_calls}) was used up"))

    def output_that_fits(self, prompt: int, need: CallNeed, *, closing: bool) -> int:
        """The most output tokens (up to `need.max_tokens`) a call with a prompt of `prompt` tokens may have now
        (negative: not even its prompt fits)."""
        left = self.limits.max_tokens - self.tokens_used - self.reserved_tokens - prompt
        if not closing:
            left -= self.closing_tokens
        fits = min(left, need.max_tokens)
        if self.limits.max_cost is None or need.price is None:
            return fits
        money = self.limits.max_cost - self.cost_usd - self.reserved_cost
        if not closing:
            money -= self.closing_cost(need.price)
        return min(fits, _affordable(prompt, need, money))

    def _too_little(self, prompt: int, need: CallNeed, closing: bool) -> str:
        tokens_left = self.limits.max_tokens - self.usage.total_tokens - (0 if closing else self.closing_tokens)
        if self.limits.max_cost is not None and need.price is not None:
            money = self.limits.max_cost - self.cost_usd - (0 if closing else self.closing_cost(need.price))
            if _affordable(prompt, need, money) < min(MIN_OUTPUT_TOKENS, need.max_tokens):
                return (
                    f"the cost budget (${self.limits.max_cost:g}) was used up: ${max(money, 0):.6f} is left"
                    f"{'' if closing else ' besides what is kept for the closing answer'}, not enough for the "
                    f"next call's prompt of about {prompt} tokens and a useful answer"
                )
        return (
            f"the token budget ({self.limits.max_tokens}) was used up: {max(tokens_left, 0)} tokens are left"
            f"{'' if closing else ' besides those kept for the closing answer'}, not enough for the next call's "
            f"prompt of about {prompt} tokens and a useful answer"
        )

    def _reserve(
        self, chain: tuple[Budget, ...], need: CallNeed, prompt: int, max_tokens: int, estimate: int
    ) -> Reservation:
        cost = (need.price(prompt, max_tokens) or 0.0) if need.price is not None else 0.0
        held = Reservation(max_tokens, prompt + max_tokens, cost, chain, estimate)
        for budget in chain:
            budget.model_calls += 1
            budget.reserved_tokens += held.tokens
            budget.reserved_cost += cost
            budget.in_flight += 1
        return held

    async def wait_for_change(self) -> None:
        """Until a call charged here ends."""
        if self._change is None:
            self._change = anyio.Event()
        await self._change.wait()

    def changed(self) -> None:
        if self._change is not None:
            self._change.set()
            self._change = None

    def after_call(self, usage: Usage) -> None:
        self.usage = self.usage + usage
        self.tokens_used = self.usage.total_tokens
        if usage.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += usage.cost_usd
        if self.tokens_used >= self.limits.max_tokens:
            self._run_out(self._tokens_used_up())
        if (limit := self.limits.max_cost) is not None and self.cost_usd >= limit:
            self._run_out(self._cost_used_up())

    def used_fallback(self, note: str) -> None:
        self.fallbacks.append(note)

    async def waiting(self, limit: str, seconds: float) -> None:
        """A call is about to wait about `seconds` for `limit`: counted for the notes, and told as progress."""
        for budget in self.chain:
            budget.waits.setdefault(limit, []).append(seconds)
        if self.on_wait is not None:
            await self.on_wait(f"waiting {seconds:.0f} s for {limit}")

    def note(self, topic: str, text: str) -> None:
        for budget in self.chain:
            budget.notes.setdefault(topic, text)

    def call_notes(self) -> list[str]:
        """What the run's caller should know about its calls: limits that held them, output limits lowered, a cost
        budget that could not count every call."""
        waited = [
            f"Model calls waited {len(s)} time{'' if len(s) == 1 else 's'} for {limit}: {sum(s):.0f} s in all, the "
            f"longest {max(s):.0f} s. Raise the limit if the endpoint allows more: the waits count against the run's "
            "deadline."
            for limit, s in self.waits.items()
        ]
        others = [self.lowered_note(), self.cost_note()]
        return [*waited, *self.notes.values(), *(n for n in others if n is not None)]

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

    def lowered_note(self) -> str | None:
        """What the run's caller should know of calls whose output limit was lowered to fit; None: nothing."""
        if not self.lowered:
            return None
        calls = f"{len(self.lowered)} model call{'' if len(self.lowered) == 1 else 's'}"
        return (
            f"{calls} had their output limit lowered to fit what was left of the run's budgets (to "
            f"{min(self.lowered)} tokens at the least), so an answer may have been cut short; a larger token budget "
            f"(max_tokens, {self.limits.max_tokens} now){' or cost budget (max_cost)' if self.limits.max_cost else ''}"
            " gives them more."
        )

    def _tokens_used_up(self) -> str:
        return f"the token budget ({self.limits.max_tokens}) was used up"

    def _cost_used_up(self) -> str:
        return f"the cost budget (${self.limits.max_cost:g}) was used up"

    def _run_out(self, what: str) -> str:
        self.exhausted = self.exhausted or what
        return self.exhausted


def _affordable(prompt: int, need: CallNeed, money: float) -> int:
    """The most output tokens (up to `need.max_tokens`) a call with a prompt of `prompt` tokens can have for
    `money`; -1 when not even its prompt can be paid. A binary search: prices may come in tiers, and are looked
    up, not solved."""
    assert need.price is not None
    price = need.price
    if (price(prompt, 0) or 0.0) > money:
        return -1
    if (price(prompt, need.max_tokens) or 0.0) <= money:
        return need.max_tokens
    low, high = 0, need.max_tokens  # low fits, high does not
    while high - low > 1:
        mid = (low + high) // 2
        if (price(prompt, mid) or 0.0) <= money:
            low = mid
        else:
            high = mid
    return low


class FinalCall(MeterWrapper):
    """The meter for the closing answer: it may spend the call, the tokens and the cost kept for it."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(budget)
        self.budget = budget

    def before_call(self, need: CallNeed) -> Awaitable[Reservation]:
        return self.budget.before_call(need, closing=True)


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
