"""`mcp-team trace`: a run's trace as a waterfall in the terminal, from a trace directory or file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mcp_team.cli.common import EXIT_FAILED, EXIT_OK, error

if TYPE_CHECKING:
    from mcp_team.cli.common import Subparsers


def add_parsers(sub: Subparsers) -> None:
    show = sub.add_parser("trace", help="show a run's trace as a waterfall (from a trace directory or file)")
    show.add_argument("run", help="a run id (looked up in --dir) or an OTLP JSON trace file")
    show.add_argument("--dir", metavar="DIR", help="the trace directory (default: $MCP_TEAM_TRACE_DIR)")
    show.add_argument(
        "--jaeger-json", metavar="FILE", help="also copy the trace (OTLP JSON) to FILE, e.g. for Jaeger's Upload"
    )
    show.add_argument("--width", type=int, default=100, help="columns (default 100)")
    show.set_defaults(handler=trace_command)


def trace_command(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from mcp_team.cli.settings import process_settings
    from mcp_team.telemetry.tracefile import load_trace_file
    from mcp_team.telemetry.waterfall import render_waterfall

    if not args.run.strip():  # Path("") is ".", a directory: it was said to be one, not that the id is empty
        return error("the run id is empty; give a run id (see mcp-team runs) or the path of a trace file")
    path = Path(args.run)
    if path.is_dir():
        return error(f"{path} is a directory; give a trace file, or a run id with --dir {path}")
    if not path.is_file() and (path.suffix == ".json" or len(path.parts) > 1):  # a path, not a run id
        return error(f"{path}: no such trace file")
    if not path.is_file():
        directory = args.dir or process_settings(args).trace_dir
        if not directory:
            return error(
                "no trace directory: pass --dir DIR or set MCP_TEAM_TRACE_DIR (where `run`/`serve` "
                "wrote traces with --trace-dir), or give the path of a trace file"
            )
        path = Path(directory) / f"{args.run}.json"
        if not path.is_file():
            known = sorted(p.stem for p in Path(directory).glob("*.json"))[-5:]
            return error(
                f"no trace for run '{args.run}' in {directory}"
                + (
                    f" (latest: {', '.join(known)})"
                    if known
                    else " (it is empty)"
                    if Path(directory).is_dir()
                    else " (no such directory)"
                ),
                EXIT_FAILED,
            )
    try:
        doc = load_trace_file(path)
    except OSError as exc:
        return error(f"{path} is not a usable trace file: {exc.strerror or exc}", EXIT_FAILED)
    except ValueError as exc:  # its message names the file
        return error(str(exc), EXIT_FAILED)
    print("\n".join(render_waterfall(doc, width=args.width)))
    if args.jaeger_json:
        shutil.copyfile(path, args.jaeger_json)
        print(f"mcp-team: wrote {args.jaeger_json} (Jaeger UI: Search > Upload > JSON File)", file=sys.stderr)
    return EXIT_OK
