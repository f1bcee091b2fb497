"""`mcp-team eval SUITE`: run a suite of cases through the team and say which pass, with a table, a JSON
report, pass rates over repeats, and the team against a single agent doing the same job."""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mcp_team.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    call_timeout_flag,
    check_faults,
    console,
    error,
    log_to_stderr,
    model_flags,
    print_table,
    register_secrets,
    team_flag,
    unwritable,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from mcp_team.cli.common import Subparsers
    from mcp_team.evals.report import CaseSummary
    from mcp_team.evals.runner import CaseRun, EvalPlan
    from mcp_team.evals.suite import Case, Suite
    from mcp_team.handoffs import RunResult, Team
    from mcp_team.handoffs.checkpoints import Decision
    from mcp_team.llm import ModelSet
    from mcp_team.llm.settings import ModelSettings
    from mcp_team.runs.service import Runs
    from mcp_team.teamfile.loading import TeamSpec


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
    ev.add_argument(
        "--json", action="store_true", help="print the report as JSON on stdout, instead of the tables (as run --json)"
    )
    ev.add_argument("--report", metavar="FILE", help="also write the report as JSON to FILE (the tables still print)")
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
    call_timeout_flag(ev)
    ev.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="wind each run down after SECONDS of wall-clock time (replaces the team file's): a slow local "
        "model's runs may need more than the default",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ev.set_defaults(handler=eval_command)


def eval_command(args: argparse.Namespace) -> int:
    from mcp_team.cli.settings import model_settings, team_spec
    from mcp_team.evals.suite import load_suite

    if args.repeat < 1:
        return error(f"--repeat must be at least 1, got {args.repeat}")
    log_to_stderr()
    suite, source = load_suite(args.suite)  # a ConfigError reaches main(), which says it as a usage error
    spec = team_spec(args)
    if args.deadline is not None:  # over the team file's, as `run --deadline`
        from pydantic import ValidationError

        from mcp_team.handoffs.budget import merge_budgets

        try:
            budgets = merge_budgets(spec.run_settings.budgets, {"deadline_seconds": args.deadline})
        except ValidationError:
            return error(f"--deadline must be a positive number of seconds, at most a year; got {args.deadline:g}")
        spec = dataclasses.replace(spec, overrides={**spec.overrides, "budgets": budgets})
    settings = model_settings(args).model_copy(update=spec.model_overrides)
    register_secrets(settings, spec)
    check_faults(settings, spec)
    suite.check_team(spec.names, source)
    if args.report and (problem := unwritable(args.report, "report.json")):  # before the runs, not after them
        return error(f"--report {args.report}: {problem}")
    return _evaluate(args, suite, source, spec, settings)


def _evaluate(args: argparse.Namespace, suite: Suite, source: str, spec: TeamSpec, settings: ModelSettings) -> int:
    import signal

    import anyio
    from rich.text import Text

    from mcp_team.cli.interrupt import until_signalled
    from mcp_team.evals.report import OFFLINE_NOTICE
    from mcp_team.evals.runner import EvalPlan
    from mcp_team.server.children import kill_child_groups

    err, out = console(stderr=True), console()
    backend = settings.backend()
    replaying = backend == "replay"
    notice = OFFLINE_NOTICE if backend == "offline" else None
    if replaying:
        notice = "replayed from recordings: no model is called; the results are the recorded model's."
    models_for = _models_for(settings, args.repeat, "")
    runs = len(suite.cases) * args.repeat * (2 if args.baseline else 1)
    if notice:
        err.print(f"[yellow]mcp-team: {notice}[/yellow]")
    # Everything from the suite or the command line is text, never markup: `[x]` in it is shown, not parsed.
    err.print(Text(f"mcp-team: {len(suite.cases)} case(s) from {source}, {runs} run(s), on {backend}"))
    team_runs: list[CaseRun] = []
    single_runs: list[CaseRun] | None = [] if args.baseline else None

    async def run_suite() -> None:
        from mcp_team.runs import open_runs

        async with spec.mcp_pool() as pool, open_runs(None, _NO_ENGINE) as service:
            plan = EvalPlan(
                suite,
                spec.build(pool),
                spec.run_settings,
                models_for,
                repeat=args.repeat,
                concurrency=settings.max_concurrency,
                record=_recorder(args.record, args.repeat, ""),
                run_team=functools.partial(_through, service),
            )
            single = dataclasses.replace(
                plan,
                models_for=_models_for(settings, args.repeat, SINGLE),
                record=_recorder(args.record, args.repeat, SINGLE),
            )
            await _run(plan, single if args.baseline else None, args, err, runs, team_runs, single_runs)

    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        try:
            # A second Ctrl-C as the runs are cancelled kills the team's external MCP servers, the slow part of
            # winding down (only in the command's own process), and what finished is still reported: it is quick,
            # and the runs that finished are the point of the eval.
            at_once = kill_child_groups if getattr(args, "own_process", False) else None
            interrupted = anyio.run(until_signalled, run_suite, None, at_once)
        except KeyboardInterrupt:  # a second Ctrl-C in a process not the command's own, or one as the loop closed
            if getattr(args, "own_process", False):
                from mcp_team.server.children import quiet_closed_loop

                quiet_closed_loop()
                kill_child_groups()
            interrupted = True
        return _report(args, out, err, suite, source, backend, notice, team_runs, single_runs, interrupted, runs)
    finally:
        if not getattr(args, "own_process", False):  # `main` in a process that goes on (a test's): as it was
            signal.signal(signal.SIGTERM, sigterm)


class _NoEngine:
    """The eval's run service runs each case on its own engine (`_through`): it has none of its own."""

    team_hash = "eval"

    async def run(self, *args: object, **kwargs: object) -> RunResult:
        raise AssertionError("an eval's runs each name their engine")


_NO_ENGINE = _NoEngine()


async def _through(
    service: Runs, team: Team, request: str, mode: Literal["adaptive", "planned"] | None, record: Path | None
) -> RunResult:
    """One case's run through the run service (in memory), as `mcp-team run` runs one: recorded to `record` when
    given. A replay that asked for a call the recording does not have raises its divergence, as a direct run did."""
    from mcp_team.errors import McpTeamError
    from mcp_team.evals.recordings import RecordedTeam
    from mcp_team.llm.replay import replay_of
    from mcp_team.runs.team_engine import TeamEngine
    from mcp_team.runs.types import RunRequest

    engine = RecordedTeam(team, record) if record is not None else TeamEngine(team)
    final = await service.run(RunRequest(request=request, mode=mode), engine=engine, approve=_cannot_ask,
                              resumable=False)  # fmt: skip
    replay = replay_of(team.models)
    if replay is not None and replay.divergence is not None:
        raise replay.divergence
    if final.result is None:
        raise McpTeamError(f"the run stopped: {final.reason or final.status}")
    return final.result


async def _cannot_ask(checkpoint: object) -> Decision:
    """An eval asks nobody at a checkpoint: the team's checkpoint_policy decides."""
    from mcp_team.handoffs.checkpoints import CannotAsk

    raise CannotAsk("an eval asks nobody", "")


async def _run(
    plan: EvalPlan,
    single: EvalPlan | None,
    args: argparse.Namespace,
    err: Console,
    total: int,
    team_runs: list[CaseRun],
    single_runs: list[CaseRun] | None,
) -> None:
    """Every run, each added to `team_runs` or `single_runs` as it finishes: an interrupted eval keeps them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from mcp_team.evals.baseline import run_single_case
    from mcp_team.evals.runner import run_all

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=args.quiet, transient=True) as progress:
        task = progress.add_task("cases", total=total)

        def done(label: str, into: list[CaseRun]) -> Callable[[CaseRun], None]:
            def on_done(r: CaseRun) -> None:
                into.append(r)
                progress.advance(task)
                if not args.quiet:
                    again = f" ({r.attempt})" if args.repeat > 1 else ""
                    mark = Text("✓", "green") if r.passed else Text("✗", "red")
                    progress.console.print(Text.assemble(mark, f" {label}{r.case.name}{again}"))

            return on_done

        await run_all(plan, on_done=done("", team_runs))
        if single is not None and single_runs is not None:
            await run_all(single, run_single_case, on_done=done("single agent: ", single_runs))


def _report(
    args: argparse.Namespace,
    out: Console,
    err: Console,
    suite: Suite,
    source: str,
    backend: str,
    notice: str | None,
    team_runs: list[CaseRun],
    single_runs: list[CaseRun] | None,
    interrupted: bool,
    planned: int,
) -> int:
    """The JSON report first (the one thing a second signal must not cost), then the table of what finished and
    the failures; the exit status: 130 when interrupted, else 0 only when every case passed."""
    import json

    from rich.text import Text

    from mcp_team.evals.report import json_report, summarize

    order = {case.name: i for i, case in enumerate(suite.cases)}
    for runs in (team_runs, single_runs or []):
        runs.sort(key=lambda r: (order[r.case.name], r.attempt))  # suite order, not the order they finished
    finished = len(team_runs) + len(single_runs or [])
    # A signal once every run had finished (the team's MCP servers closing) cut nothing short: the eval is whole.
    interrupted = interrupted and finished < planned
    written = None
    if args.json or args.report:
        report = json_report(source, backend, notice, args.repeat, team_runs, single_runs, interrupted=interrupted)
        if interrupted:
            counts = {c.name: 0 for c in suite.cases}
            for r in team_runs:
                counts[r.case.name] += 1
            report["not_finished"] = [name for name, n in counts.items() if n < args.repeat]
    if args.report:
        try:
            Path(args.report).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            written = args.report
        except OSError as exc:  # checked before the runs, but a disk fills up: said, the table still shown
            error(f"--report {args.report}: cannot write the report ({exc.strerror or exc})", EXIT_FAILED)
    if args.json:  # the report on stdout, as `run --json` prints its result: the tables are left out
        print(json.dumps(report, indent=2, ensure_ascii=False), flush=True)
    summaries = summarize(team_runs)
    title = f"{suite.name or source}: {sum(s.passed for s in summaries)}/{len(suite.cases)} cases pass"
    if interrupted:
        title += f" (interrupted: {finished} of {planned} run(s) finished)"
    failed = [r for r in team_runs if not r.passed]
    if not args.json:
        _print_tables(out, args, summaries, title, notice, failed, team_runs, single_runs, interrupted, backend)
    if written:
        err.print(Text(f"mcp-team: report written to {written}"))
    if interrupted:
        err.print(f"mcp-team: interrupted: {finished} of {planned} run(s) finished; the report shows those")
        return EXIT_CANCELLED
    if written is None and args.report:
        return EXIT_FAILED
    return EXIT_OK if not failed else EXIT_FAILED


def _print_tables(
    out: Console,
    args: argparse.Namespace,
    summaries: list[CaseSummary],
    title: str,
    notice: str | None,
    failed: list[CaseRun],
    team_runs: list[CaseRun],
    single_runs: list[CaseRun] | None,
    interrupted: bool,
    backend: str,
) -> None:
    """The table of the cases, the failures, and with a baseline the team against a single agent."""
    from rich.text import Text

    from mcp_team.evals.report import case_table, paired_table, verdict_line

    print_table(out, case_table(summaries, title=title, caption=notice))
    for r in failed[:20]:
        again = f" (run {r.attempt})" if args.repeat > 1 else ""
        # The failures quote the suite's text and the answer: plain text, `[` included, never markup.
        out.print(Text.assemble((f"✗ {r.case.name}{again}", "red"), ": " + "; ".join(r.failures()[:3])))
    if single_runs:
        print_table(out, paired_table(team_runs, single_runs))
        print_table(out, _side_by_side(team_runs, single_runs, interrupted))
        out.print(Text(verdict_line(team_runs, single_runs, backend)))


def _side_by_side(team_runs: list[CaseRun], single_runs: list[CaseRun], interrupted: bool) -> Table:
    """The team against a single agent. Interrupted, on the runs both finished: the single agent's runs come after
    all of the team's, so totals over everything that finished would set a whole suite against a part of it."""
    from mcp_team.evals.report import baseline_table

    if not interrupted:
        return baseline_table(team_runs, single_runs)
    both = {(r.case.name, r.attempt) for r in team_runs} & {(r.case.name, r.attempt) for r in single_runs}
    return baseline_table(
        [r for r in team_runs if (r.case.name, r.attempt) in both],
        [r for r in single_runs if (r.case.name, r.attempt) in both],
        title=f"The team against a single agent, on the {len(both)} run(s) both finished before the interrupt",
    )


SINGLE = ".single-agent"  # the suffix of a case's single-agent recording


def _models_for(settings: ModelSettings, repeat: int, suffix: str) -> Callable[[Case, int], ModelSet]:
    """The models of each case's run: the same models for all (their limits shared), with faults of their own;
    a replay of the case's own recording when replaying a directory of them."""
    from mcp_team.llm.building import build_models
    from mcp_team.llm.faults import parse_faults, with_faults
    from mcp_team.llm.replay import replay_models
    from mcp_team.llm.settings import parse_model

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
