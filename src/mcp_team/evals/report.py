"""What an eval says: a table per case (routed to, expected, pass or pass rate, handoffs, tokens, cost, wall
time), the team against a single agent side by side, and the same as a JSON report."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_team.evals.runner import CaseRun
from mcp_team.evals.suite import Case

if TYPE_CHECKING:
    from rich.table import Table

OFFLINE_NOTICE = (
    "offline backend: deterministic answers, no LLM is called. It routes by fixed keyword rules, so its passes "
    "show that the suite and the engine work, not how well a model routes: run the suite on your model for that."
)


@dataclass
class CaseSummary:
    """Every run of one case."""

    case: Case
    runs: list[CaseRun]

    @property
    def passes(self) -> int:
        return sum(r.passed for r in self.runs)

    @property
    def passed(self) -> bool:
        return self.passes == len(self.runs)

    def mean(self, what: str) -> float:
        return statistics.fmean(getattr(r, what) for r in self.runs) if self.runs else 0.0

    def cost(self) -> float | None:
        costs = [r.cost_usd for r in self.runs if r.cost_usd is not None]
        return statistics.fmean(costs) if costs else None

    def routed(self) -> str:
        """What the runs routed to: the one routing, or each with how often it happened."""
        seen: dict[str, int] = {}
        for r in self.runs:
            key = " → ".join(r.routed) if r.error is None else "(error)"
            seen[key or "(none)"] = seen.get(key or "(none)", 0) + 1
        if len(seen) == 1:
            return next(iter(seen))
        return "; ".join(f"{k} ×{n}" for k, n in sorted(seen.items(), key=lambda kv: -kv[1]))


def summarize(runs: Sequence[CaseRun]) -> list[CaseSummary]:
    """The runs grouped by case, in suite order."""
    by_case: dict[str, CaseSummary] = {}
    for r in runs:
        by_case.setdefault(r.case.name, CaseSummary(r.case, [])).runs.append(r)
    return list(by_case.values())


def _money(cost: float | None) -> str:
    return "—" if cost is None else f"${cost:.4f}"


def case_table(summaries: Sequence[CaseSummary], *, title: str, caption: str | None) -> Table:
    from rich.table import Table
    from rich.text import Text

    repeat = max((len(s.runs) for s in summaries), default=1)
    # The suite's name (or path) is text: `[x]` in it is shown, not taken as markup.
    table = Table(title=Text(title), caption=caption, caption_justify="left", show_lines=False)
    table.add_column("case", no_wrap=True)
    table.add_column("routed to")
    table.add_column("expected")
    table.add_column("pass" if repeat == 1 else "pass rate", justify="center")
    for column in ("handoffs", "tokens", "cost", "wall time"):
        table.add_column(column if repeat == 1 else f"{column} (mean)", justify="right")
    for s in summaries:
        if repeat == 1:
            verdict = "[green]pass[/green]" if s.passed else "[red]FAIL[/red]"
        else:
            style = "green" if s.passed else "red"
            verdict = f"[{style}]{s.passes}/{len(s.runs)}[/{style}]"
        table.add_row(
            s.case.name,
            Text(s.routed()),
            Text(s.case.expect.describe()),  # the suite's text and patterns, `[` and `\\` included: never markup
            verdict,
            f"{s.mean('handoffs'):.3g}",
            f"{s.mean('tokens'):,.0f}",
            _money(s.cost()),
            f"{s.mean('seconds'):.2f}s",
        )
    return table


def totals(runs: Sequence[CaseRun]) -> dict[str, Any]:
    """Sums over runs: model calls, tokens, cost (None when nothing was priced), wall time, pass rates."""
    costs = [r.cost_usd for r in runs if r.cost_usd is not None]
    n = len(runs) or 1
    return {
        "runs": len(runs),
        "model_calls": sum(r.model_calls for r in runs),
        "tokens": sum(r.tokens for r in runs),
        "cost_usd": sum(costs) if costs else None,
        "seconds": round(sum(r.seconds for r in runs), 3),
        "pass_rate": sum(r.passed for r in runs) / n,
        "answer_pass_rate": sum(r.answer_passed for r in runs) / n,
        "routing_rate": routing_rate(runs),  # None: no run had routing checks (a single agent's never has)
        "errors": sum(r.error is not None for r in runs),  # runs that could not run: no measure of anything
    }


def baseline_table(
    team: Sequence[CaseRun], single: Sequence[CaseRun], title: str = "The team against a single agent (same cases)"
) -> Table:
    from rich.table import Table
    from rich.text import Text

    caption = Text(
        "A single agent has every specialist's tools and one prompt; routing checks do not apply to it, so "
        "both are compared on the answer's checks (status, text, patterns, cost). Wall time is the sum over cases."
    )
    # A run that could not run (a missing recording, a divergence) is no measure of who does the job better:
    # count it apart and say why, so 0% never reads as "the single agent failed every case".
    for name, runs in (("team", team), ("single agent", single)):
        if failed := [r for r in runs if r.error is not None]:
            first = f"{failed[0].case.name}: {(failed[0].error or '').splitlines()[0]}"
            caption.append(f"\n{name}: {len(failed)} run(s) could not run, e.g. {first}", style="red")
    table = Table(title=Text(title), caption=caption, caption_justify="left")
    columns = ("", "model calls", "tokens", "cost", "wall time", "pass rate (answer)", "routing", "pass rate (all)")
    for column in (*columns, "could not run"):
        table.add_column(column, justify="left" if not column else "right")
    for name, runs in (("team", team), ("single agent", single)):
        t = totals(runs)
        table.add_row(
            name,
            f"{t['model_calls']:,}",
            f"{t['tokens']:,}",
            _money(t["cost_usd"]),
            f"{t['seconds']:.2f}s",
            f"{t['answer_pass_rate']:.0%}",
            f"{t['routing_rate']:.0%}" if t["routing_rate"] is not None else "n/a",
            f"{t['pass_rate']:.0%}" if name == "team" else "n/a",
            f"[red]{t['errors']}[/red]" if t["errors"] else "0",
        )
    return table


def routing_rate(runs: Sequence[CaseRun]) -> float | None:
    """The share of runs with routing checks whose routing was right; None when no run has any."""
    judged = [r.routed_right for r in runs if r.routed_right is not None]
    return sum(judged) / len(judged) if judged else None


def paired_table(team: Sequence[CaseRun], single: Sequence[CaseRun]) -> Table:
    """Each case, the team and the single agent side by side: answer passed, routing (the team's), tokens, wall."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text("Per case: the team and a single agent"), caption_justify="left")
    table.add_column("case", no_wrap=True)
    for column in ("team: answer", "routed", "tokens", "wall", "single agent: answer", "tokens ", "wall "):
        table.add_column(column, justify="right" if column.strip() in ("tokens", "wall") else "center")
    singles = {s.case.name: s for s in summarize(single)}
    for s in summarize(team):
        other = singles.get(s.case.name)
        routed = [r.routed_right for r in s.runs if r.routed_right is not None]
        table.add_row(
            s.case.name,
            _mark(s.runs, lambda r: r.answer_passed),
            "—" if not routed else f"{'✓' if all(routed) else '✗'} {s.routed()}",
            f"{s.mean('tokens'):,.0f}",
            f"{s.mean('seconds'):.1f}s",
            _mark(other.runs, lambda r: r.answer_passed) if other else "—",
            f"{other.mean('tokens'):,.0f}" if other else "—",
            f"{other.mean('seconds'):.1f}s" if other else "—",
        )
    return table


def _mark(runs: Sequence[CaseRun], passed: Callable[[CaseRun], bool]) -> str:
    n = sum(passed(r) for r in runs)
    if len(runs) == 1:
        return "[green]pass[/green]" if n else "[red]FAIL[/red]"
    return f"{n}/{len(runs)}"


def verdict_line(team: Sequence[CaseRun], single: Sequence[CaseRun], backend: str) -> str:
    """Which wins on this model, and at what cost: the answer pass rates, the team's routing, tokens and wall."""
    t, s = totals(team), totals(single)
    if t["answer_pass_rate"] > s["answer_pass_rate"]:
        who = "the team wins"
    elif t["answer_pass_rate"] < s["answer_pass_rate"]:
        who = "the single agent wins"
    else:
        who = "a tie"
    routing = routing_rate(team)
    routed = f", routing {routing:.0%} right" if routing is not None else ""

    def times(a: float, b: float) -> str:
        return f"{a / b:.1f}x" if b else "n/a"

    return (
        f"Verdict on {backend}: {who}: answers pass {t['answer_pass_rate']:.0%} (team{routed}) against "
        f"{s['answer_pass_rate']:.0%} (single agent), at {times(t['tokens'], s['tokens'])} the tokens "
        f"({t['tokens']:,} vs {s['tokens']:,}) and {times(t['seconds'], s['seconds'])} the wall time "
        f"({t['seconds']:.0f}s vs {s['seconds']:.0f}s)."
    )


def json_report(
    suite: str,
    backend: str,
    notice: str | None,
    repeat: int,
    team: Sequence[CaseRun],
    single: Sequence[CaseRun] | None,
    *,
    interrupted: bool = False,
) -> dict[str, Any]:
    """The report; `interrupted`: the eval was stopped (Ctrl-C, SIGTERM) and it holds the runs that finished."""

    def cases(runs: Sequence[CaseRun]) -> list[dict[str, Any]]:
        return [
            {
                "name": s.case.name,
                "request": s.case.request,
                "tags": s.case.tags,
                "expected": s.case.expect.model_dump(),
                "passed": s.passed,
                "pass_rate": s.passes / len(s.runs),
                "runs": [r.report() for r in s.runs],
            }
            for s in summarize(runs)
        ]

    report: dict[str, Any] = {
        "suite": suite,
        "backend": backend,
        "notice": notice,
        "repeat": repeat,
        "interrupted": interrupted,
        "passed": not interrupted and all(r.passed for r in team),  # cases that did not run did not pass
        "totals": totals(team),
        "cases": cases(team),
    }
    if single is not None:
        report["baseline"] = {"kind": "single-agent", "totals": totals(single), "cases": cases(single)}
    return report
