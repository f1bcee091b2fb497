"""`mcp-team runs`: the runs in the runs database (list, show one, cancel one), and the durability flags
that `serve` and `run` share (`--ephemeral`, `--state-dir`, `--database-url`, `--executor-id`).

Reading runs needs no server: the run store is the database, readable by any process. Cancelling a run
another process is running marks it cancelled in DBOS; that process stops it within a second. Cancelling a
cancelled run again cancels its DBOS workflow if an earlier cancel did not get to it. Cancelling a run that has
ended is a success that says how it ended, as the `cancel_run` tool returns its record.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from mcp_team.cli.common import EXIT_FAILED, EXIT_OK, error
from mcp_team.telemetry.content import redact

if TYPE_CHECKING:
    from mcp_team.cli.common import Subparsers
    from mcp_team.runs.config import DurableConfig
    from mcp_team.runs.sql_store import SqlRunStore as RunStore
    from mcp_team.runs.types import RunRecord


def durable_flags(parser: argparse.ArgumentParser, *, ephemeral: bool = True, executor: bool = True) -> None:
    """The durability flags; `ephemeral` and `executor` for the commands that run runs (`runs` only reads)."""
    group = parser.add_argument_group("durable runs (on by default: runs survive a restart)")
    if ephemeral:
        group.add_argument("--ephemeral", action="store_true", help="keep runs in memory only (nothing survives)")
    group.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where runs are kept (default: $MCP_TEAM_STATE_DIR, else $XDG_STATE_HOME/mcp-team)",
    )
    group.add_argument(
        "--database-url",
        metavar="URL",
        help="sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB (default: $MCP_TEAM_DATABASE_URL, else "
        "runs.sqlite in the state directory)",
    )
    if executor:
        # Named in the messages about ids (executor.py, config.py) and in a dead process's note (`_left`):
        # the way to resume the runs of a process that died, or to give each replica its fixed id.
        group.add_argument(
            "--executor-id",
            metavar="ID",
            help="this process's id, which owns its runs: a restart with the same id resumes them (default: "
            "$MCP_TEAM_EXECUTOR_ID, else the first free <hostname>-<n>)",
        )


def durable_config(args: argparse.Namespace) -> DurableConfig | None:
    """The durable-runs configuration the flags and environment say; None with `--ephemeral`.
    Raises `ConfigError` naming what to fix."""
    if getattr(args, "ephemeral", False):
        return None
    import os

    from mcp_team.runs.config import resolve

    return resolve(state_dir=args.state_dir, database_url=args.database_url,
                   executor_id=getattr(args, "executor_id", None), environ=os.environ)  # fmt: skip


def add_parsers(sub: Subparsers) -> None:
    runs = sub.add_parser("runs", help="list the runs kept in the runs database; show or cancel one")
    _runs_flags(runs)
    # One subcommand per action, each taking the options too: `runs show --json ID` and `runs show ID --json`
    # both work (two optional positionals would be split by an option between them).
    actions = runs.add_subparsers(dest="action", metavar="ACTION", title="actions (default: list)")
    for action, text in (("list", "list the newest runs"), ("show", "a run's handoffs and answer"),
                         ("cancel", "cancel a run (the process running it stops it within a second)")):  # fmt: skip
        # SUPPRESS: an option given before the action is not reset to its default by the action's parser.
        parser = actions.add_parser(action, help=text, argument_default=argparse.SUPPRESS)
        _runs_flags(parser, listing=action == "list")
        if action != "list":
            parser.add_argument("run_id", metavar="ID", help=f"the run to {action}")
    runs.set_defaults(handler=runs_command, action="list", run_id=None, json=False, limit=20)  # after the actions


def _runs_flags(parser: argparse.ArgumentParser, *, listing: bool = True) -> None:
    durable_flags(parser, ephemeral=False, executor=False)
    parser.add_argument("--json", action="store_true", help="print JSON")
    if listing:
        parser.add_argument("--limit", type=int, metavar="N", help="how many runs to list (default 20)")


MAX_LIMIT = 1_000_000  # runs listed at most at once (beyond it SQLite cannot even take the number)


def runs_command(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIMIT:
        return error(f"--limit must be between 1 and {MAX_LIMIT:,}, got {args.limit}")
    config = durable_config(args)
    assert config is not None
    import sqlalchemy as sa

    from mcp_team.runs.database import check_state_dir, damaged, is_damaged, open_engine
    from mcp_team.runs.sql_store import SqlRunStore as RunStore

    if config.sqlite_path is not None and not config.sqlite_path.exists():
        check_state_dir(config.sqlite_path.parent, config)
        store = None  # nothing was ever kept there: do not create it just to list nothing
    else:
        # Listing and showing only read: they work on a state directory this user may not write.
        store = RunStore(open_engine(config, read_only=args.action != "cancel"))
    try:
        if store is not None:
            store.check_version()
        return _act(args, config, store)
    except sa.exc.DatabaseError as exc:  # a damaged page found past the schema that open_engine reads
        if config.sqlite_path is None or not is_damaged(exc):
            raise
        raise damaged(config.sqlite_path, exc, config) from None
    finally:
        if store is not None:
            store.dispose()


def _act(args: argparse.Namespace, config: DurableConfig, store: RunStore | None) -> int:
    if args.action == "list":
        records = store.list(limit=args.limit) if store is not None and store.exists() else []
        if args.json:
            print(json.dumps([{**_line(r), **_process(config, r)} for r in records], indent=2))
        elif not records:
            print(f"mcp-team: no runs in {config.redacted_url}", file=sys.stderr)
        for r in records if not args.json else []:
            gone = f" ({_left(r)})" if _orphaned(config, r) else ""
            print(f"{r.run_id}  {r.status:<11}  {r.started_at:%Y-%m-%d %H:%M:%S}  {_short(r.request)}{gone}")
        return EXIT_OK
    record = store.get(args.run_id) if store is not None and store.exists() else None
    if record is None or store is None:
        return error(f"no run {args.run_id!r} in {config.redacted_url} (see 'mcp-team runs')", EXIT_FAILED)
    if args.action == "show":
        if args.json:
            print(json.dumps({**record.view(), **_process(config, record)}, indent=2))
        else:
            _show(record)
            if _orphaned(config, record):
                print(f"\nno process runs it now (its process, {record.executor_id}, has ended): {_left(record)}")
        return EXIT_OK
    # Idempotent, as the `cancel_run` tool is: a finished run is left as it is and the command succeeds, saying
    # how it ended (a script's `runs cancel ID || fail` must not fail on a run that ended meanwhile). A run
    # recorded cancelled whose workflow may still run is cancelled again.
    final, cancelled = _cancel(store, record)
    if not cancelled:  # ended before, or in the instant between the read and the cancel
        return _already_ended(final)
    print(f"mcp-team: run {record.run_id} cancelled", file=sys.stderr)
    return EXIT_OK


def _already_ended(record: RunRecord) -> int:
    print(f"mcp-team: run {record.run_id} had already ended ({record.status}); nothing to cancel", file=sys.stderr)
    return EXIT_OK


def _cancel(store: RunStore, record: RunRecord) -> tuple[RunRecord, bool]:
    """Cancel another process's run as the run service cancels one (runs/cancels.py: the record, then DBOS's
    workflow, through a DBOS client: this command runs no workflows), or finish a cancel left half done. The run's
    record after, and whether this cancelled anything."""
    import anyio
    from dbos import DBOSClient

    from mcp_team.runs import cancels
    from mcp_team.runs.errors import CancelRefused
    from mcp_team.runs.serializer import JSONSerializer

    client = DBOSClient(system_database_engine=store.engine, serializer=JSONSerializer())
    try:
        if record.finished:
            return record, anyio.run(cancels.finish_half_cancel, record, client)
        final = anyio.run(cancels.cancel_elsewhere, store, record, "cancelled with mcp-team runs cancel", client)
        return final or record, final is not None and final.status == "cancelled"
    except CancelRefused as exc:
        raise exc.retried_with(f"Run 'mcp-team runs cancel {record.run_id}' again") from None
    finally:
        client.destroy()


def _orphaned(config: DurableConfig, record: RunRecord) -> bool:
    """A running run whose process has ended (it shows `running` until a server resumes it)."""
    from mcp_team.runs.executor import holder_gone

    return not record.finished and holder_gone(config, record.executor_id)


def _left(record: RunRecord) -> str:
    """What becomes of a run whose process has ended (SQLite: `holder_gone`). A server on this state directory
    takes it over (orphans.py); `mcp-team run` resumes only its own id's runs, so the id is named."""
    if record.resumable:
        return (f"no process: resumes from its last finished step once `mcp-team serve` runs on this state "
                f"directory, or `mcp-team run` or `serve` starts with --executor-id {record.executor_id}; "
                f"or cancel it")  # fmt: skip
    return (
        "no process: it ran on a client's model and cannot resume; a server here, or the next process "
        f"with --executor-id {record.executor_id}, marks it interrupted"
    )


def _process(config: DurableConfig, r: RunRecord) -> dict[str, object]:
    """Which process runs (or ran) `r` and whether it is gone: what a script needs to resume it with that
    process's `--executor-id`."""
    return {"executor_id": r.executor_id, "process_gone": _orphaned(config, r)}


def _line(r: RunRecord) -> dict[str, object]:
    return {"run_id": r.run_id, "status": r.status, "request": redact(r.request)[:200], "thread": r.thread,
            "started_at": r.started_at.isoformat(), "reason": r.reason}  # fmt: skip


def _show(r: RunRecord) -> None:
    print(f"run {r.run_id}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
    print(f"request: {r.request}")
    if r.thread:
        print(f"thread: {r.thread}")
    print(f"started {r.started_at:%Y-%m-%d %H:%M:%S} UTC, updated {r.updated_at:%Y-%m-%d %H:%M:%S} UTC")
    if r.waiting is not None:  # answer it with the answer_checkpoint tool of `mcp-team serve`
        print(f"waiting at checkpoint {r.waiting.name} (answer_checkpoint):\n{r.waiting.summary}")
    result = r.result
    for h in result.handoffs if result is not None else []:
        print(f"  {h.id} {h.target:<12} {h.status:<10} {_short(h.output or h.error or h.task, 70)}")
    if result is not None and result.answer:
        print()
        print(result.answer)


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
