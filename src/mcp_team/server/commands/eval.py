"""`mcp-team eval SUITE`: run a suite of cases through the team and say which pass, with a table, a JSON
report, pass rates over repeats, and the team against a single agent doing the same job."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_team.server.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    check_faults,
    error,
    log_to_stderr,
    model_flags,
    model_settings,
    register_secrets,
    team_flag,
)

if TYPE_CHECKING:
    from rich.console import Console

    from mcp_team.evals.runner import CaseRun, EvalPlan
    from mcp_team.evals.suite import Case, Suite
    from mcp_team.llm import ModelSet
    from mcp_team.llm.settings import ModelSettings
    from mcp_team.server.commands.common import Subparsers
    from mcp_team.server.teamfile import TeamSpec


def add_parsers(sub: Subparsers) -> None:
    ev = sub.add_parser(
        "eval",
        help="run a suite of cases through the team and check routing, answers and cost",
        description="Run every case of SUITE (a TOML file; `builtin` for the built-in routing suite) through the "
        "team and check its expectations. Exit status 0 only when every case passes.",
    )
    ev.add_argument("suite", metavar="SUITE", help="the suite file, or `builtin`")
    model_flags(ev)
    team_flag(ev)
    ev.add_argument("--repeat", type=int, default=1, metavar="N", help="run each case N times (pass rate per case)")
    ev.add_argument("--json", metavar="FILE", help="write the report as JSON to FILE")
    ev.add_argument(
        "--baseline",
        choices=["single-agent"],
        help="also run the cases on one agent with every specialist's tools, and compare",
    )
    ev.add_argument(
        "--record",
        metavar="DIR",
        help="record each case's run to DIR/<case>.jsonl; replay them all with --model replay:DIR",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ev.set_defaults(handler=eval_command)


def eval_command(args: argparse.Namespace) -> int:
    from mcp_team.evals.suite import load_suite
    from mcp_team.server.teamfile import load_team

    if args.repeat < 1:
        return error(f"--repeat must be at least 1, got {args.repeat}")
    log_to_stderr()
    suite, source = load_suite(args.suite)  # a ConfigError reaches main(), which says it as a usage error
    spec = load_team(args.team)
    settings = model_settings(args).model_copy(update=spec.model_overrides)
    register_secrets(settings, spec)
    check_faults(settings, spec)
    suite.check_team(spec.names, source)
    if args.json and not Path(args.json).resolve().parent.is_dir():  # before the runs, not after them
        return error(f"--json {args.json}: its directory does not exist; create it or write the report elsewhere")
    return _evaluate(args, suite, source, spec, settings)


def _evaluate(args: argparse.Namespace, suite: Suite, source: str, spec: TeamSpec, settings: ModelSettings) -> int:
    import json

    import anyio
    from rich.console import Console

    from mcp_team.evals.report import OFFLINE_NOTICE, baseline_table, case_table, json_report, summarize
    from mcp_team.evals.runner import EvalPlan

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, width=None if Console().is_terminal else 160)
    backend = settings.backend()
    replaying = backend == "replay"
    notice = OFFLINE_NOTICE if backend == "offline" else None
    if replaying:
        notice = "replayed from recordings: no model is called; the results are the recorded model's."
    models_for = _models_for(settings, args.repeat, "")
    runs = len(suite.cases) * args.repeat * (2 if args.baseline else 1)
    if notice:
        err.print(f"[yellow]mcp-team: {notice}[/yellow]")
    err.print(f"mcp-team: {len(suite.cases)} case(s) from {source}, {runs} run(s), on {backend}")

    async def run_suite() -> tuple[list[CaseRun], list[CaseRun] | None]:
        async with spec.mcp_pool() as pool:
            plan = EvalPlan(
                suite,
                spec.build(pool),
                spec.run_settings,
                models_for,
                repeat=args.repeat,
                concurrency=settings.max_concurrency,
                record=_recorder(args.record, args.repeat, ""),
            )
            single = dataclasses.replace(
                plan,
                models_for=_models_for(settings, args.repeat, SINGLE),
                record=_recorder(args.record, args.repeat, SINGLE),
            )
            return await _run(plan, single if args.baseline else None, args, err, runs)

    team_runs, single_runs = anyio.run(run_suite)
    title = f"{suite.name or source}: {sum(s.passed for s in summarize(team_runs))}/{len(suite.cases)} cases pass"
    out.print(case_table(summarize(team_runs), title=title, caption=notice))
    failed = [r for r in team_runs if not r.passed]
    for r in failed[:20]:
        again = f" (run {r.attempt})" if args.repeat > 1 else ""
        out.print(f"[red]✗ {r.case.name}{again}[/red]: " + "; ".join(r.failures()[:3]))
    if single_runs is not None:
        out.print(baseline_table(team_runs, single_runs))
    if args.json:
        report = json_report(source, backend, notice, args.repeat, team_runs, single_runs)
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        err.print(f"mcp-team: report written to {args.json}")
    return EXIT_OK if not failed else EXIT_FAILED


async def _run(
    plan: EvalPlan, single: EvalPlan | None, args: argparse.Namespace, err: Console, total: int
) -> tuple[list[CaseRun], list[CaseRun] | None]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mcp_team.evals.baseline import run_single_case
    from mcp_team.evals.runner import run_all

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=args.quiet, transient=True) as progress:
        task = progress.add_task("cases", total=total)

        def done(label: str) -> Callable[[CaseRun], None]:
            def on_done(r: CaseRun) -> None:
                progress.advance(task)
                if not args.quiet:
                    mark = "[green]✓[/green]" if r.passed else "[red]✗[/red]"
                    again = f" ({r.attempt})" if args.repeat > 1 else ""
                    progress.console.print(f"{mark} {label}{r.case.name}{again}")

            return on_done

        team_runs = await run_all(plan, on_done=done(""))
        single_runs = None
        if single is not None:
            single_runs = await run_all(single, run_single_case, on_done=done("single agent: "))
    return team_runs, single_runs


SINGLE = ".single-agent"  # the suffix of a case's single-agent recording


def _models_for(settings: ModelSettings, repeat: int, suffix: str) -> Callable[[Case, int], ModelSet]:
    """The models of each case's run: the same models for all (their limits shared), with faults of their own;
    a replay of the case's own recording when replaying a directory of them."""
    from mcp_team.llm.faults import parse_faults, with_faults
    from mcp_team.llm.replay import replay_models
    from mcp_team.llm.settings import build_models, parse_model

    faults = settings.faults
    if settings.backend() == "replay":
        source = Path(parse_model(settings.model or "").name or "")

        def replayed(case: Case, attempt: int) -> ModelSet:
            path = source
            if source.is_dir():
                path = _recording(source, case, attempt, repeat, suffix)
            return with_faults(replay_models(path, settings.max_concurrency), parse_faults(faults))

        return replayed
    shared = build_models(settings.model_copy(update={"faults": ""}))
    return lambda case, attempt: with_faults(shared, parse_faults(faults))


def _recording(folder: Path, case: Case, attempt: int, repeat: int, suffix: str) -> Path:
    numbered = folder / f"{case.name}{suffix}-{attempt}.jsonl"
    return numbered if repeat > 1 and numbered.exists() else folder / f"{case.name}{suffix}.jsonl"


def _recorder(folder: str | None, repeat: int, suffix: str) -> Callable[[Case, int], str] | None:
    if folder is None:
        return None
    return lambda case, attempt: str(
        Path(folder) / (f"{case.name}{suffix}-{attempt}.jsonl" if repeat > 1 else f"{case.name}{suffix}.jsonl")
    )
