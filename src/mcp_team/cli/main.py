"""The `mcp-team` command line: the parser, `main`, and the one-line error report.

The commands live in `mcp_team.cli`, one module per group. Imports stay light at module
level: clients spawn `mcp-team serve` at every launch, and the anthropic SDK and rich are only
imported by the commands that use them.
"""

from __future__ import annotations

import _signal  # `signal` without its enums: imported at start-up already, so it costs nothing (see main)
import os
import sys

TYPE_CHECKING = False  # not `typing`'s: importing typing takes longer than all of the above (see main)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

EXIT_CLOSED_OUTPUT = 141  # 128 + SIGPIPE: how `yes | head -1` ends, for shells with `set -o pipefail`


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from mcp_team import __version__

    parser = argparse.ArgumentParser(
        prog="mcp-team", description="A team of LLM specialists and a supervisor, as an MCP server."
    )
    parser.add_argument("--version", action="version", version=f"mcp-team {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Imported here, not at module level: `main` sets how `run` and `eval` take a signal before they load.
    from mcp_team.cli import eval, run, runs, serve, team, trace

    for command in (run, runs, serve, team, trace, eval):  # each adds its subcommands, in this order in --help
        command.add_parsers(sub)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown one is said by its command's parser, with that command's usage (the top-level
    parser said it with `usage: mcp-team [-h] COMMAND ...`)."""
    import argparse

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        message = f"unrecognized arguments: {' '.join(extra)}"
        if args.command == "eval" and args.json:  # `--json FILE`, as eval took it before --json meant one thing
            message += "; --json prints the report on stdout and takes no FILE: write a file with --report FILE"
        commands.choices[args.command].error(message)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    # `run` and `eval` cancel their work on SIGTERM as on Ctrl-C once it starts (cli/interrupt.py). Before,
    # from here on, a SIGTERM is a Ctrl-C: KeyboardInterrupt, said below, exit 130; with the default action it
    # killed the command silently with 143 (`eval` loading its suite, a CI job cancelled early). Here is first: the
    # imports before it are Python's own start-up, the package's docstrings and this module's (loaded already);
    # importing the commands (typing, argparse...) comes after.
    found = _signal.getsignal(_signal.SIGTERM) if words[:1] in (["run"], ["eval"]) else None
    early = found == _signal.SIG_DFL
    if argv is None and _signal.getsignal(_signal.SIGINT) == _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupt_once)
    if argv is None:
        sys.unraisablehook = _unraisable
    try:
        if early:
            _set_sigterm(_signal.default_int_handler)  # SIGTERM raises KeyboardInterrupt, as Ctrl-C
        args = parse(argv)
        args.own_process = argv is None  # this process is the command's own (not a caller's, e.g. a test's)
        code: int = args.handler(args)
        sys.stdout.flush()  # output still buffered would fail at exit, past the handling below
        return code
    except BaseException as exc:
        if not _interrupted(exc):
            if os.environ.get("MCP_TEAM_DEBUG"):
                raise
            return report(exc)
        if early and _signal.getsignal(_signal.SIGTERM) == _signal.default_int_handler:
            _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)  # a second SIGTERM now would be a traceback
        if argv is None and _signal.getsignal(_signal.SIGINT) in (_signal.default_int_handler, _interrupt_once):
            # A second Ctrl-C while this says so (the import below is a first one early in the start-up) ends
            # the process at once, as a second Ctrl-C does elsewhere, instead of raising here: a traceback.
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        from mcp_team.cli.common import EXIT_CANCELLED

        print("mcp-team: cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    finally:
        if argv is None:
            _ignore_sigterm_at_exit()
        if found is not None and argv is not None and _signal.getsignal(_signal.SIGTERM) != found:
            # `main` called in a process that goes on (a test's, a program's of its own handler) leaves SIGTERM as
            # it found it: set here, or ignored as a run was cancelled (cli/run.py). The command's own
            # process keeps it to its end (a SIGTERM ignored while a run is cancelled is still ignored at exit).
            _set_sigterm(found)


def _interrupt_once(_signum: int, _frame: object) -> None:
    """Ctrl-C outside the command's own handling (cli/interrupt.py), e.g. in start-up: a KeyboardInterrupt, said
    below; a second one ends the process at once. With Python's handler, a second Ctrl-C that came while the
    first unwound an import landed in the import's clean-up: "Exception ignored ... Traceback" on stderr."""
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    raise KeyboardInterrupt


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """A Ctrl-C that landed in a finalizer (a `__del__`, a generator closed as the command unwinds) is the command's
    own end, said by it ("mcp-team: cancelled"); Python printed it as "Exception ignored in ..." and a traceback.
    Anything else is said as Python says it."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def _interrupted(exc: BaseException) -> bool:
    """A Ctrl-C: a KeyboardInterrupt, also as the only kind of exception in a task group's (it may land in any task
    of one: a group then wraps it, and it was said as "an unexpected KeyboardInterrupt")."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_interrupted(e) for e in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt)


def _ignore_sigterm_at_exit() -> None:
    """The command has ended with its status: a SIGTERM as the interpreter exits changes nothing. Python's exit gives
    a signal it handled its default action back before it unloads its modules (a tenth of a second and more here),
    and a SIGTERM then (a supervisor stopping everything; an MCP client's close-stdin-then-SIGTERM as `serve` exits;
    a second one to `serve --http`) killed a command whose work and output were complete: 143, which a script reads
    as killed. Ignored from the exit's handlers on (`atexit`), not now: before them the interpreter waits for the
    command's threads, and one that never ended would make a process that also ignores SIGTERM."""
    import atexit  # built into the interpreter: some tens of microseconds

    atexit.register(_set_sigterm, _signal.SIG_IGN)


def _set_sigterm(handler: object) -> None:
    try:
        _signal.signal(_signal.SIGTERM, handler)
    except ValueError:  # `main` called in a thread other than the main one: it cannot take signals
        return  # (not contextlib.suppress: importing contextlib is what this comes before)


def report(exc: BaseException) -> int:
    """A clear one-line error instead of a traceback (MCP_TEAM_DEBUG=1 shows the traceback)."""
    from mcp_team.cli.common import EXIT_FAILED, EXIT_USAGE, error
    from mcp_team.errors import ConfigError

    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]  # the server's task groups wrap a start-up failure
    if isinstance(leaf, ConfigError):
        return error(str(leaf), EXIT_USAGE)
    if isinstance(leaf, BrokenPipeError):
        return closed_output()
    database_errors = sys.modules.get("sqlalchemy.exc")  # loaded only if a command opened the runs database
    if database_errors is not None and isinstance(leaf, database_errors.SQLAlchemyError):
        # A query a command made past opening the database (e.g. a table this user may not read): the driver's
        # reason in one line, not SQLAlchemy's several (the statement, a link) as an "unexpected" error.
        from mcp_team.runs.database import is_refused, reason_of

        # a privilege the user lacks is configuration, as when `run` or `serve` find it opening the database
        return error(f"the runs database failed: {reason_of(leaf)}", EXIT_USAGE if is_refused(leaf) else EXIT_FAILED)
    if isinstance(leaf, OSError):
        where = f" ({leaf.filename})" if leaf.filename else ""
        return error(f"{leaf.strerror or leaf}{where}", EXIT_FAILED)
    if isinstance(leaf, SystemExit):
        return int(leaf.code or 0) if isinstance(leaf.code, int) else EXIT_FAILED
    return error(
        f"unexpected {type(leaf).__name__}: {leaf} (set MCP_TEAM_DEBUG=1 to see the traceback; please report it)",
        EXIT_FAILED,
    )


def closed_output() -> int:
    """The reader of our output left (`mcp-team runs show ID | head -1`): stop quietly, as command-line tools
    do. Python ignores SIGPIPE, so the failed write is an exception rather than the usual silent death; what
    is still buffered goes to the null device, or flushing it at exit would fail again, loudly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_OUTPUT


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
