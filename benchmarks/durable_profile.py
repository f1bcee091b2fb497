"""Where a durable run's added CPU goes (issue 32: "say by how much, with a profile"), with py-spy, which samples
every thread (DBOS works in executor threads of its own, the run store in AnyIO's: cProfile sees the main one only):

    .venv/bin/py-spy record --threads -r 200 -f raw -o durable.raw -- \\
        .venv/bin/python benchmarks/durable_profile.py run 25
    .venv/bin/python benchmarks/durable_profile.py summary durable.raw

`run SECONDS [memory]` runs K=8 runs of durable_team.py's team (SQLite, or in memory) in a loop and prints the CPU
per run; `summary FILE` groups py-spy's samples by where they were: DBOS's system-database operations (by
operation), SQLAlchemy, the run store, the hops between threads.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from pathlib import Path

K = 8


async def loop(seconds: float, durable: bool) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from durable_team import one_run, services, team
    from mcp_team.runs.team_engine import TeamEngine

    async with services() as (on_disk, in_memory):
        runs, engine = (on_disk if durable else in_memory), TeamEngine(team(K))
        for _ in range(3):  # warm
            await one_run(runs, engine)
        end, n, cpu = time.perf_counter() + seconds, 0, time.process_time()
        while time.perf_counter() < end:
            await one_run(runs, engine)
            n += 1
        cpu = (time.process_time() - cpu) / n
        where = "durable (SQLite)" if durable else "in memory"
        print(f"{where}: {n} runs of K={K}, {cpu * 1000:.1f} ms CPU per run, {cpu / (K + 1) * 1000:.2f} ms per "
              f"handoff (the supervisor's turn counted as one)")  # fmt: skip


PARTS = [  # (name, a frame's pattern), first match wins, from the deepest frame up
    ("DBOS system database: {}", re.compile(r"^SystemDatabase\.(\w+).*\(dbos/_sys_db\.py")),
    ("DBOS other", re.compile(r"\(dbos/")),
    ("run store (mcp_team/runs/*store*, at_rest)", re.compile(r"mcp_team/runs/(\w*store|at_rest)")),
    ("wake-ups across threads (asyncio self-pipe, conditions)", re.compile(r"_write_to_self|Condition\.notify")),
    ("engine, models, spans (mcp_team)", re.compile(r"mcp_team/")),
]


def summary(path: Path) -> None:
    parts: Counter[str] = Counter()
    sql, total = 0, 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        stack, count = line.rsplit(" ", 1)
        frames, n = stack.split(";")[1:], int(count)
        total += n
        sql += n if any("(sqlalchemy/" in f for f in frames) else 0
        parts[_part(frames)] += n
    print(f"{total} samples; under SQLAlchemy: {sql / total:.0%}")
    for name, n in parts.most_common(20):
        print(f"  {n / total:6.1%}  {name}")


def _part(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in PARTS:
            if match := pattern.search(frame):
                return name.format(*match.groups())
    return "waiting or other (threads idle in select/queues, the interpreter)"


if __name__ == "__main__":
    import anyio

    if sys.argv[1:2] == ["run"]:
        anyio.run(loop, float(sys.argv[2]), sys.argv[3:4] != ["memory"])
    elif sys.argv[1:2] == ["summary"]:
        summary(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
