"""DBOS alone, through its public API: the CPU a child workflow and a step cost, with no mcp-team code around them.
`.venv/bin/python benchmarks/dbos_floor.py [--json]` (durable_team.py runs it beside its own figures; `make bench`).

A durable mcp-team run makes each concurrent handoff a child workflow and each model call a step (issue 32). This
measures what those two cost DBOS itself, on mcp-team's own SQLite engine (`runs.database.sqlite_engine`: WAL,
synchronous=NORMAL, one connection): a parent workflow starts K children, each running S steps of a function that
returns at once, for K in (1, 8) and S in (0, 1). Per child: (CPU(K=8) - CPU(K=1)) / 7; per step: the S=1 figure
less the S=0 one. So a durable run's added CPU per handoff can be read against the floor no code of ours could
go under while a handoff is a child workflow with one step. Its own process: DBOS is one per process.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dbos import DBOS, DBOSConfig

from mcp_team.runs.database import sqlite_engine


async def _returns(x: int) -> int:
    return x + 1


@DBOS.workflow(name="floor.child")
async def child(i: int, steps: int) -> int:
    for _ in range(steps):
        i = await DBOS.run_step_async({"name": "model"}, _returns, i)
    return i


@DBOS.workflow(name="floor.parent")
async def parent(k: int, steps: int) -> int:
    handles = [await DBOS.start_workflow_async(child, i, steps) for i in range(k)]  # in order, as branches are
    return sum([await h.get_result() for h in handles])


async def cpu_per_run(k: int, steps: int, rounds: int = 7, runs: int = 20) -> float:
    for _ in range(3):  # warm
        await parent(k, steps)
    medians = []
    for _ in range(rounds):
        c = time.process_time()
        for _ in range(runs):
            await parent(k, steps)
        medians.append((time.process_time() - c) / runs)
    return statistics.median(medians)


async def main(as_json: bool) -> int:
    with tempfile.TemporaryDirectory() as state:
        path = str(Path(state) / "floor.sqlite")
        config: DBOSConfig = {
            "name": "dbos-floor",
            "system_database_url": f"sqlite:///{path}",
            "system_database_engine": sqlite_engine(path),
        }
        DBOS(config=config)
        DBOS.launch()
        try:
            per: dict[int, float] = {}
            for steps in (0, 1):
                one, eight = await cpu_per_run(1, steps), await cpu_per_run(8, steps)
                per[steps] = (eight - one) / 7
        finally:
            DBOS.destroy()
    child_ms, step_ms = per[0] * 1000, (per[1] - per[0]) * 1000
    if as_json:
        print(json.dumps({"child_ms": child_ms, "step_ms": step_ms}))
        return 0
    print(f"DBOS alone (public API, mcp-team's SQLite engine): a child workflow {child_ms:.1f} ms, a step "
          f"{step_ms:.1f} ms of CPU; a handoff of one model call: {child_ms + step_ms:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main("--json" in sys.argv[1:])))
