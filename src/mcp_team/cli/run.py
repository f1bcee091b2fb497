"""`mcp-team run`: one request through the team, the answer on stdout and progress on stderr."""

from __future__ import annotations

import argparse
import functools
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mcp_team.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    call_timeout_flag,
    check_faults,
    error,
    log_to_stderr,
    model_flags,
    register_secrets,
    start_tracing,
    team_flag,
    trace_flags,
    unwritable,
)
from mcp_team.cli.run_console import compare, progress, summary, warn_about_servers
from mcp_team.cli.runs import durable_config, durable_flags

if TYPE_CHECKING:
    from mcp_team.cli.common import Subparsers
    from mcp_team.handoffs import Budgets, RunEvent, RunResult
    from mcp_team.llm import ModelSet
    from mcp_team.llm.settings import ModelSettings
    from mcp_team.runs.config import DurableConfig
    from mcp_team.teamfile.loading import TeamSpec
    from mcp_team.telemetry.setup import Tracing

EventSink = Callable[["RunEvent"], Awaitable[None]]


def add_parsers(sub: Subparsers) -> None:
    run = sub.add_parser("run", help="run one request through the team and print the answer")
    run.add_argument(
        "request", nargs="?", default="", help="what you want the team to do (replaying: the recorded one)"
    )
    model_flags(run)
    team_flag(run)
    trace_flags(run)
    run.add_argument(
        "--jaeger-json", metavar="FILE", help="write this run's trace to FILE (OTLP JSON: Jaeger's Upload reads it)"
    )
    run.add_argument("--mode", choices=["adaptive", "planned"], help="adaptive (default) or planned")
    run.add_argument("--json", action="store_true", help="print the structured run result as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")
    budget = "; replaces the team file's, for this run"
    run.add_argument("--max-handoffs", type=int, metavar="N", help=f"stop after N handoffs, retries included{budget}")
    run.add_argument(
        "--max-model-calls", type=int, metavar="N", help=f"stop after N model calls, of every member together{budget}"
    )
    run.add_argument(
        "--max-tokens", type=int, metavar="N", help=f"stop after N tokens, in and out, of every member together{budget}"
    )
    run.add_argument(
        "--deadline", type=float, metavar="SECONDS", help=f"wind the run down after SECONDS of wall-clock time{budget}"
    )
    durable_flags(run)
    run.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop when the priced calls cost this much (calls of unknown cost are not counted: --json's notes say "
        "how many)",
    )
    call_timeout_flag(run)
    run.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="NAME",
        help='stop for your approval at NAME ("plan" or "before:<member>"), added to the team file\'s; '
        "asked on the terminal, or the team's checkpoint_policy when not interactive",
    )
    run.add_argument(
        "--record",
        metavar="FILE",
        help="write every model exchange of the run and its result to FILE (JSON lines, secrets redacted); "
        "replay it with --model replay:FILE",
    )
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from mcp_team.cli.settings import model_settings, team_spec
    from mcp_team.handoffs import validation_problems
    from mcp_team.handoffs.budget import merge_budgets
    from mcp_team.handoffs.checkpoints import checkpoint_problems
    from mcp_team.llm.building import build_models
    from mcp_team.llm.replay import replay_of

    log_to_stderr()
    try:
        spec = team_spec(args)
        settings = model_settings(args).model_copy(update=spec.model_overrides)
        register_secrets(settings, spec)
        check_faults(settings, spec)
        models = build_models(settings, spec.member_models, environ=os.environ)
        replay = replay_of(models)
        if not args.request.strip() and replay is not None:
            args.request = str(replay.recording.header.run.get("request", ""))
            args.mode = args.mode or replay.recording.header.run.get("mode")
        if not args.request.strip():
            return error('the request is empty; say what you want the team to do, e.g. mcp-team run "..."')
        if not _is_utf8(args.request):
            return error("the request is not valid UTF-8 text; set the terminal's encoding to UTF-8", EXIT_USAGE)
        if args.jaeger_json and (problem := unwritable(args.jaeger_json, "trace.json")):
            return error(f"--jaeger-json {args.jaeger_json}: {problem}", EXIT_USAGE)
        if wrong := checkpoint_problems(args.checkpoint, spec.names):
            return error("invalid --checkpoint: " + "; ".join(wrong), EXIT_USAGE)
        flags = {
            "max_handoffs": args.max_handoffs,
            "max_model_calls": args.max_model_calls,
            "max_tokens": args.max_tokens,
            "deadline_seconds": args.deadline,
            "max_cost": args.max_cost,
        }
        budgets = merge_budgets(spec.run_settings.budgets, flags)  # over the team file's, as run_team merges
        # A recorded or replayed run is its own record: it runs in this process only.
        args.durable = None if args.record or settings.record_dir or replay is not None else durable_config(args)
    except ValidationError as exc:  # a ConfigError reaches main(), which says it the same way
        problems = "; ".join(map(_as_flag, validation_problems(exc)))
        return error(f"invalid budget: {problems}", EXIT_USAGE)
    if args.durable is None and not args.ephemeral and not args.quiet:
        print("mcp-team: a recorded or replayed run is not kept in the runs database: the recording is its record",
              file=sys.stderr)  # fmt: skip
    if args.jaeger_json and not args.trace_dir:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mcp-team-trace-") as trace_dir:
            return _run_traced(args, spec, settings, models, budgets, trace_dir)
    return _run_traced(args, spec, settings, models, budgets, None)


def _as_flag(problem: str) -> str:
    """`deadline_seconds: ...` as `--deadline: ...`: a problem named by the flag that set the value."""
    key, _, what = problem.partition(": ")
    return f"--{ {'deadline_seconds': 'deadline'}.get(key, key).replace('_', '-') }: {what}"


def _run_traced(
    args: argparse.Namespace,
    spec: TeamSpec,
    settings: ModelSettings,
    models: ModelSet,
    budgets: Budgets | None,
    trace_dir: str | None,
) -> int:
    import anyio
    from rich.console import Console

    tracing = start_tracing(args, trace_dir)

    from mcp_team.llm.replay import replay_of

    run_id = uuid.uuid4().hex
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    replay = replay_of(models)
    if settings.backend() == "offline":
        console.print("[yellow]mcp-team: offline backend: deterministic answers, no LLM is called[/yellow]")
    elif replay is not None:
        console.print(f"[yellow]mcp-team: replaying {replay.recording.path}: no model is called[/yellow]")
    else:
        warn_about_servers(console, models)  # a model name its server does not serve, said before the first call
    on_event = None if args.quiet else progress(console)
    try:
        record = args.record or (str(Path(settings.record_dir) / f"{run_id}.jsonl") if settings.record_dir else None)
        run = functools.partial(_team_run, spec, models, args.request, args.mode, budgets, on_event, record, run_id,
                                args.durable, args.checkpoint)  # fmt: skip
        # Ctrl-C or SIGTERM cancels the run: what it had done is printed, as its result (None: it had none yet).
        result = anyio.run(_interruptible, run, getattr(args, "own_process", False))
        if result is None:  # cancelled before the run started: as the team's external MCP servers started, say
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        # Cancelled before the run started: the SDK's start of the team's external MCP servers was cut short, and a
        # server left running would outlive the command (asyncio then said "Loop ... that handles pid ... is
        # closed"). Only in the command's own process: `main` called in another (a test's) leaves its children
        # alone, and gets a second Ctrl-C here too (`interrupt.until_signalled`).
        if getattr(args, "own_process", False):
            from mcp_team.server.children import kill_child_groups, quiet_closed_loop

            quiet_closed_loop()  # the event loop is closed: asyncio's word on the killed servers is noise
            kill_child_groups()
        raise
    except Exception:
        if replay is not None and replay.divergence is not None:
            return error(str(replay.divergence), EXIT_FAILED)
        raise
    finally:
        if tracing is not None:
            tracing.shutdown()
    if replay is not None and replay.divergence is not None:  # the run asked a call the recording does not have
        return error(str(replay.divergence), EXIT_FAILED)
    print(result.model_dump_json(indent=2) if args.json else result.answer, flush=True)  # the answer comes first
    if not args.quiet:
        summary(console, result)
        if replay is not None:
            compare(console, replay, result)
    if args.jaeger_json:
        written = _save_jaeger(tracing, result.run_id, args.jaeger_json)
        console.print(f"mcp-team: trace written to {written}" if written else "mcp-team: no trace was recorded")
    return {"complete": EXIT_OK, "partial": EXIT_PARTIAL, "cancelled": EXIT_CANCELLED}.get(result.status, EXIT_FAILED)


async def _interruptible(run: Callable[..., Awaitable[RunResult]], own_process: bool) -> RunResult | None:
    """`run(on_finish=..., recorded=...)`, cancelled by Ctrl-C or SIGTERM (then its cancelled result, what finished,
    or None when it had none yet): killed by SIGTERM the command left its run running (a durable one for the next
    process to resume), and Ctrl-C printed nothing of what the run had done. See `interrupt.until_signalled`."""
    from mcp_team.cli.interrupt import exit_now, until_signalled

    stopped: list[RunResult] = []  # the run's last result, as the engine or the run service ends it
    result: RunResult | None = None
    recording = [False]  # while the run's cancel is being recorded: a second signal waits for it

    async def work() -> None:
        nonlocal result
        result = await run(on_finish=stopped.append, recording=recording)

    await until_signalled(work, hold=lambda: recording[0], at_once=exit_now if own_process else None)
    if result is None:
        return stopped[-1] if stopped else None
    return result


async def _team_run(
    spec: TeamSpec,
    models: ModelSet,
    request: str,
    mode: Literal["adaptive", "planned"] | None,
    budgets: Budgets | None,
    on_event: EventSink | None,
    record: str | None = None,
    run_id: str | None = None,
    durable: DurableConfig | None = None,
    checkpoints: list[str] | None = None,
    *,
    on_finish: Callable[[RunResult], None],
    recording: list[bool],
) -> RunResult:
    """One run of the team file's team through the run service, with the team's external MCP servers up for the
    run's duration: durable (`durable`: kept in the runs database, resumed by a later process if this one dies),
    else in memory; with `record`, every model exchange and the result are written to that file. Its id is said
    first, so a user can find it after an interruption (`mcp-team runs show ID`). Cancelling the call (Ctrl-C,
    SIGTERM) cancels the run, recorded before this returns (`recording` is set meanwhile); `on_finish` gets its
    cancelled result. Checkpoints are asked on the terminal (runs/approvals.py records the answers)."""
    import anyio

    from mcp_team.cli.ask import terminal_approver
    from mcp_team.errors import McpTeamError
    from mcp_team.evals.recordings import RecordedTeam
    from mcp_team.handoffs import Team
    from mcp_team.runs import open_runs
    from mcp_team.runs.team_engine import TeamEngine
    from mcp_team.runs.types import RunRequest

    asked = RunRequest(request=request, mode=mode, budgets=budgets, checkpoints=tuple(checkpoints or ()))
    async with spec.mcp_pool() as pool:
        team = Team(models, spec.build(pool), spec.run_settings)
        engine = RecordedTeam(team, Path(record)) if record else TeamEngine(team)
        async with open_runs(durable, engine) as runs:
            replicas = runs.durable.replicas if runs.durable is not None else None
            if replicas is not None and team.models.limits is not None:  # PostgreSQL: rates of every replica
                team.models.limits.share(replicas.rate)
            resumed = [s for s in runs.recovered if s.resumed]
            if resumed:  # runs an earlier process with this executor id left: said, so their calls are no surprise
                ids = ", ".join(s.run_id for s in resumed)
                print(f"mcp-team: also resuming {len(resumed)} unfinished run(s) an earlier process left: {ids} "
                      "(they go on while this command runs; see mcp-team runs)", file=sys.stderr,
                      flush=True)  # fmt: skip
            with anyio.CancelScope(shield=True):  # a run started is a run this command knows of, to cancel it
                started = await runs.start(asked, engine=engine, on_event=on_event, approve=terminal_approver(),
                                           run_id=run_id, resumable=not record)  # fmt: skip
            if runs.durable is not None:
                print(f"mcp-team: run {started.run_id} (see: mcp-team runs show {started.run_id})", file=sys.stderr,
                      flush=True)  # fmt: skip
            try:
                final = await runs.wait(started.run_id)
            except anyio.get_cancelled_exc_class():
                recording[0] = True
                with anyio.CancelScope(shield=True):
                    final = await runs.cancel(started.run_id, "cancelled from the command line")
                recording[0] = False
                if final is not None and final.result is not None:
                    on_finish(final.result)
                raise
            if still := [s.run_id for s in resumed if not await runs.is_over(s.run_id)]:
                print(f"mcp-team: {len(still)} earlier run(s) did not finish before this one: {', '.join(still)}; "
                      "they go on at the next mcp-team run or serve on this state directory",
                      file=sys.stderr)  # fmt: skip
    if final is None or final.result is None:
        raise McpTeamError(f"run {started.run_id} stopped: {final.reason if final else 'not found'}")
    return final.result


def _is_utf8(text: str) -> bool:
    """False for a command line that was not UTF-8: Python keeps its bytes as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _save_jaeger(tracing: Tracing | None, run_id: str, target: str) -> str | None:
    import shutil

    files = tracing.trace_files if tracing is not None else None
    if files is None or not files.path_for(run_id).is_file():
        return None
    shutil.copyfile(files.path_for(run_id), target)
    return target
