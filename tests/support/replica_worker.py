"""One replica of the run service on PostgreSQL, driven over stdin (tests run two and kill -9 one).

Usage: replica_worker.py EXECUTOR_ID LOG K STEPS LATENCY  (database: MCP_TEAM_DATABASE_URL; the lease:
MCP_TEAM_LEASE_SECONDS). Prints `READY <executor id>`, or `ERROR <message>` and exits 2 when it cannot
start. Commands, one a line, answered by one JSON line each (commands run concurrently):
  start ID | get ID | wait ID | cancel ID | subscribe ID (answers when the run has finished, with the
  statuses seen) | takeovers (executor ids this replica took runs over from) | quit
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
from typing import Any

import anyio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mcp_team.errors import ConfigError
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine


def _say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _dump(record: Any) -> Any:
    return None if record is None else json.loads(record.model_dump_json())


async def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1`: every thread's stack on stderr, even if the loop is stuck
    executor_id, log, k, steps, latency = sys.argv[1:6]
    config = resolve(executor_id=executor_id, environ=os.environ)
    engine = FakeEngine(k=int(k), steps=int(steps), latency=float(latency), log=log)
    try:
        async with open_runs(config, engine) as runs:
            print("READY", runs.executor_id, flush=True)

            async def handle(cmd: str, arg: str) -> None:
                if cmd == "start":
                    _say(cmd=cmd, record=_dump(await runs.start(RunRequest(request="fan out"), run_id=arg)))
                elif cmd == "get":
                    _say(cmd=cmd, record=_dump(await runs.get(arg)))
                elif cmd == "wait":
                    _say(cmd=cmd, record=_dump(await runs.wait(arg)))
                elif cmd == "cancel":
                    _say(cmd=cmd, record=_dump(await runs.cancel(arg)))
                elif cmd == "subscribe":
                    seen = [r.status async for r in runs.subscribe(arg)]
                    _say(cmd=cmd, statuses=seen)
                elif cmd == "tasks":  # for debugging a test: where every task of this replica waits
                    import asyncio
                    import io

                    out = io.StringIO()
                    for task in asyncio.all_tasks():
                        task.print_stack(file=out)
                    _say(cmd=cmd, stacks=out.getvalue())
                elif cmd == "takeovers":
                    replicas = runs.durable.replicas if runs.durable is not None else None
                    _say(cmd=cmd, ids=replicas.taken_over if replicas is not None else [])

            async with anyio.create_task_group() as tg:
                async for line in anyio.wrap_file(sys.stdin):
                    cmd, _, arg = line.strip().partition(" ")
                    if cmd == "quit":
                        tg.cancel_scope.cancel()
                        break
                    tg.start_soon(handle, cmd, arg)
    except ConfigError as exc:
        print("ERROR", exc, flush=True)
        sys.exit(2)


anyio.run(main)
