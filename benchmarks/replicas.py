"""Replicas on PostgreSQL: `.venv/bin/python benchmarks/replicas.py` (part of `make bench`).

Starts a throwaway PostgreSQL 15 (tests/support/postgres.py) and measures, with the fake engine of
tests/support/durable_engine.py (a plan call; K handoffs of 2 model steps, a gather of 2 tool steps and a
decision; a synthesis call):

1. CPU per handoff of this process, durable on PostgreSQL against SQLite and ephemeral (zero latency;
   PostgreSQL's own CPU is not counted: it is another process, on another machine in production).
2. Runs per second with one and with two replica processes (tests/support/replica_worker.py), 40 runs of K=4
   put on the shared queue: model-bound (200 ms model calls, at most 2 runs per replica at once: the
   second replica's slots add throughput) and CPU-bound (zero latency: the replicas, PostgreSQL and
   this script share the machine's cores, so a second replica on the same machine adds little).
3. Enqueue-to-start latency of the run queue (from DBOS's own timestamps), polled every
   `DurableConfig.queue_poll` seconds.
4. The CPU an idle replica uses (the queue polls, the heartbeat), and PostgreSQL's for it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from durable import ephemeral_runs  # noqa: E402 - benchmarks/durable.py
from mcp_team.runs import open_runs, resolve  # noqa: E402
from mcp_team.runs.config import DurableConfig  # noqa: E402
from support.durable_engine import FakeEngine  # noqa: E402
from support.postgres import Postgres, postgres  # noqa: E402
from support.replica_workers import Replica  # noqa: E402

STEPS = 2


async def durable_runs_on(
    state: Path, url: str | None, jobs: list[tuple[FakeEngine, int]]
) -> list[tuple[float, float]]:
    """(cpu, wall) per run of each job (`n` runs one after another), durable on `url` (None: SQLite)."""
    out = []
    async with open_runs(
        resolve(state_dir=state, database_url=url, executor_id="bench", environ={}), jobs[0][0]
    ) as runs:
        for engine, n in jobs:
            runs.engine = engine
            await runs.wait((await runs.start("warm")).run_id)
            c, w = time.process_time(), time.perf_counter()
            for _ in range(n):
                record = await runs.wait((await runs.start("bench")).run_id)
                assert record is not None and record.status == "complete", record
            out.append(((time.process_time() - c) / n, (time.perf_counter() - w) / n))
    return out


async def cpu_per_handoff(pg: Postgres, quick: bool) -> None:
    n1, n8, k = (6, 4, 8) if quick else (30, 15, 8)
    jobs = [(FakeEngine(k=1, steps=STEPS), n1), (FakeEngine(k=k, steps=STEPS), n8)]
    (e1, _), (e8, _) = await ephemeral_runs(jobs)
    print(f"CPU per handoff (this process), K=1 and K={k} runs, {STEPS} model steps per handoff:")
    print(f"  {'ephemeral':>10}: {(e8 - e1) / (k - 1) * 1000:6.2f} ms per handoff")
    for label, url in (("SQLite", None), ("PostgreSQL", pg.url("bench_cpu"))):
        with tempfile.TemporaryDirectory() as d:
            (d1, _), (d8, _) = await durable_runs_on(Path(d), url, jobs)
        print(f"  {label:>10}: {(d8 - d1) / (k - 1) * 1000:6.2f} ms per handoff "
              f"(+{((d8 - d1) - (e8 - e1)) / (k - 1) * 1000:.2f} ms over ephemeral)")  # fmt: skip


def throughput(pg: Postgres, replicas: int, runs: int, tmp: Path, latency: float, per_replica: int) -> float:
    """Runs per second with `replicas` processes."""
    url = pg.url(f"bench_{replicas}_{int(latency * 1000)}")
    env = {"MCP_TEAM_RUNS_PER_REPLICA": str(per_replica)}
    group = [Replica(url, f"r{i}", tmp / f"c{replicas}{latency}.log", latency=latency, **env) for i in range(replicas)]
    try:
        assert all(r.ready for r in group), [r.first for r in group]
        head = group[0]
        head.ask("start warm")
        head.ask("wait warm")
        started = time.perf_counter()
        for i in range(runs):
            head.ask(f"start run{i}")
        for i in range(runs):
            assert head.ask(f"wait run{i}")["record"]["status"] == "complete"
        elapsed = time.perf_counter() - started
    finally:
        for r in group:
            r.quit()
    return runs / elapsed


def start_latency(pg: Postgres, n: int, tmp: Path) -> list[float]:
    """Enqueue-to-start latency of `n` runs started one after another on an idle replica."""
    url = pg.url("bench_latency")
    r = Replica(url, "lat", tmp / "lat.log", latency=0.0)
    try:
        assert r.ready, r.first
        for i in range(n):
            r.ask(f"start l{i}")
            r.ask(f"wait l{i}")
    finally:
        r.quit()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        query = ("SELECT started_at_epoch_ms - created_at FROM dbos.workflow_status "
                 "WHERE workflow_uuid LIKE 'l%' AND started_at_epoch_ms IS NOT NULL")  # fmt: skip
        rows = conn.execute(sa.text(query)).all()
    engine.dispose()
    return [row[0] / 1000 for row in rows]


def _cpu_ticks(pids: list[int]) -> int:
    """utime + stime of `pids` from /proc (Linux), in clock ticks."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total


def idle_cpu(pg: Postgres, tmp: Path, seconds: float) -> tuple[float, float]:
    """Share of a core an idle replica and PostgreSQL's processes use over `seconds`, after a warm-up."""
    r = Replica(pg.url("bench_idle"), "idle", tmp / "idle.log", latency=0.0)
    try:
        assert r.ready, r.first
        r.ask("start warm")
        r.ask("wait warm")
        time.sleep(3)
        postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
        found = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True)
        server = [postmaster, *(int(pid) for pid in found.stdout.split())]
        before = _cpu_ticks([r.proc.pid]), _cpu_ticks(server)
        time.sleep(seconds)
        after = _cpu_ticks([r.proc.pid]), _cpu_ticks(server)
    finally:
        r.quit()
    hz = os.sysconf("SC_CLK_TCK") * seconds
    return (after[0] - before[0]) / hz, (after[1] - before[1]) / hz


def main(quick: bool) -> int:
    with postgres() as pg, tempfile.TemporaryDirectory() as d:
        anyio.run(cpu_per_handoff, pg, quick)
        runs = 12 if quick else 40
        for latency, per_replica, what in ((0.2, 2, "model-bound"), (0.0, 8, "CPU-bound")):
            one = throughput(pg, 1, runs, Path(d), latency, per_replica)
            two = throughput(pg, 2, runs, Path(d), latency, per_replica)
            print(f"runs per second, {what} ({runs} runs of K=4, {latency * 1000:.0f} ms model calls, at most "
                  f"{per_replica} runs per replica at once): 1 replica {one:.2f}, 2 replicas {two:.2f} "
                  f"({two / one:.2f}x)")  # fmt: skip
        poll = DurableConfig.queue_poll
        lat = start_latency(pg, 10 if quick else 30, Path(d))
        print(
            f"enqueue-to-start latency ({len(lat)} runs, queue polled every {poll * 1000:.0f} ms): median "
            f"{statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms (DBOS's default 1 s poll: ~978 ms)"
        )
        replica, server = idle_cpu(pg, Path(d), 5 if quick else 20)
        print(f"an idle replica (queue polled every {poll * 1000:.0f} ms): {replica:.1%} of a core, "
              f"PostgreSQL {server:.1%} (at a 50 ms poll: ~20% and ~3%)")  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    sys.exit(main(parser.parse_args().quick))
