"""How far a run ends past its token and cost budgets (issue 35): the margin that budgets-as-caps leave.

A budget is a cap: a call is admitted only if its prompt estimate plus its `max_tokens`, and their price, fit
what is left (handoffs/budget.py). What is left to pass it is the prompt-estimate error: a prompt that takes more
tokens than its estimate (four characters a token). This runs seeded random K-way fan-outs (K of 1 to 8) with
random token and cost budgets on the offline model, priced as gpt-4o-mini, whose prompts count as a tokenizer
would differ from the estimate: `--more` times the estimate plus `--framing` tokens (each call's error is then
its input tokens less the estimate). It prints, over all runs: how many ended past a budget, the most they did,
and the largest single-call error, which the design says bounds the overrun.

    .venv/bin/python benchmarks/budget_margin.py                    # 200 runs, prompts a quarter larger
    .venv/bin/python benchmarks/budget_margin.py --more 1.0 --framing 1   # the offline model's own counts
    .venv/bin/python benchmarks/budget_margin.py --more 1.6 --framing 40  # a worse estimate

Exit status 1 when a run ended past a budget by more than the largest single-call error.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import dataclass, field

import anyio

from mcp_team.handoffs import Budgets, RunSettings, Team
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet, Usage
from mcp_team.llm.cost import price_of
from mcp_team.llm.limits import estimate_input_tokens
from mcp_team.llm.offline import OfflineModel
from mcp_team.specialists import Specialist

PRICED = "gpt-4o-mini"


@dataclass
class Tokenizing:
    more: float
    framing: int
    name: str = PRICED
    provider: str = "openai"
    inner: OfflineModel = field(default_factory=OfflineModel)
    errors: list[int] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        estimate = estimate_input_tokens(request)
        counted = math.ceil(estimate * self.more) + self.framing
        self.errors.append(counted - estimate)
        output = min(response.usage.output_tokens, request.max_tokens)
        usage = Usage(input_tokens=counted, output_tokens=output)
        return response.model_copy(update={"usage": usage, "model": PRICED})


async def one(rng: random.Random, more: float, framing: int) -> tuple[int, float, int, float, str]:
    k = rng.randint(1, 8)
    max_tokens = rng.randint(300, 40_000)
    max_cost = rng.uniform(5e-5, 5e-3)
    model = Tokenizing(more, framing)
    members = [Specialist(name=f"m{n}", description=f"Part {n}.", system_prompt="Answer.") for n in range(k)]
    settings = RunSettings(budgets=Budgets(max_tokens=max_tokens, max_cost=max_cost))
    result = await Team(ModelSet.single(model), members, settings).run("Look into the parts, each of you one part")
    total = result.usage.total
    error = max(model.errors, default=0)
    return total.total_tokens - max_tokens, (total.cost_usd or 0.0) - max_cost, error, max_cost, result.status


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--more", type=float, default=1.25, help="a prompt's tokens, as a multiple of the estimate")
    parser.add_argument("--framing", type=int, default=7, help="tokens a call's prompt takes beyond that")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    price = price_of(Tokenizing(args.more, args.framing))
    assert price is not None
    rows = [await one(rng, args.more, args.framing) for _ in range(args.runs)]
    token_over = [r[0] for r in rows if r[0] > 0]
    cost_over = [r[1] for r in rows if r[1] > 0]
    largest_error = max(r[2] for r in rows)
    statuses = {s: sum(r[4] == s for r in rows) for s in ("complete", "partial", "failed")}
    print(f"{args.runs} runs, K 1-8, prompts counted {args.more:g}x the estimate + {args.framing}: {statuses}")
    print(f"  token budget passed by {len(token_over)} runs, by at most {max(token_over, default=0)} tokens")
    print(f"  cost budget passed by {len(cost_over)} runs, by at most ${max(cost_over, default=0.0):.8f}")
    print(f"  the largest single-call prompt-estimate error: {largest_error} tokens (${price(largest_error, 0):.8f})")
    bad = [r for r in rows if r[0] > r[2] or r[1] > (price(r[2], 0) or 0.0) + 1e-12]
    print(f"  runs past a budget by more than their largest call's error: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
