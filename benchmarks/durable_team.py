"""Durable runs through the REAL engine: `.venv/bin/python benchmarks/durable_team.py` (part of `make bench`).

A `Team` of K specialists on the offline model (each handoff: one model call; the supervisor: a turn that
hands off to all K, then a turn that answers), run through the run service on SQLite (what `serve` and `run`
do by default), against the same team run with `--ephemeral` (`Team.run`, nothing kept).

1. CPU per run and per handoff at zero latency (process CPU, DBOS's threads included).
2. wall / ideal at K=32 with 100 ms model calls (ideal: the 3 calls of the critical path).
3. added wall time for a K=4 run whose model calls take 1 s.
Targets (issue 9): <= 10 ms added CPU per handoff, wall/ideal <= 1.10 at K=32, < 1 % added wall at 1 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import anyio

from mcp_team.handoffs import Budgets, RunSettings, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.team_engine import TeamEngine
from mcp_team.specialists import Specialist

REQUEST = "Each of you: report on your part."


def team(k: int, latency: float = 0.0) -> Team:
    specialists = [
        Specialist(name=f"w{i}", description=f"Worker {i}.", system_prompt=f"You are worker {i}.")
        for i in range(1, k + 1)
    ]
    settings = RunSettings(budgets=Budgets(max_handoffs=64, max_model_calls=200))
    return Team(ModelSet.single(OfflineModel(latency=latency), max_concurrency=64), specialists, settings)


async def ephemeral(jobs: list[tuple[Team, int]]) -> list[tuple[float, float]]:
    """(cpu, wall) per run of each job: `n` runs one after another."""
    out = []
    for t, n in jobs:
        await t.run(REQUEST)  # warm
        c, w = time.process_time(), time.perf_counter()
        for _ in range(n):
            result = await t.run(REQUEST)
            assert result.status == "complete", result.answer
        out.append(((time.process_time() - c) / n, (time.perf_counter() - w) / n))
    return out


async def durable(jobs: list[tuple[Team, int]]) -> list[tuple[float, float]]:
    out = []
    with tempfile.TemporaryDirectory() as state:
        engines = [TeamEngine(t) for t, _ in jobs]
        async with open_runs(resolve(state_dir=state, environ={}), engines[0]) as runs:
            for engine, (_, n) in zip(engines, jobs, strict=True):
                await runs.wait((await runs.start(REQUEST, engine=engine)).run_id)  # warm
                c, w = time.process_time(), time.perf_counter()
                for _ in range(n):
                    record = await runs.wait((await runs.start(REQUEST, engine=engine)).run_id)
                    assert record is not None and record.status == "complete", record.reason
                out.append(((time.process_time() - c) / n, (time.perf_counter() - w) / n))
    return out


async def main(quick: bool) -> int:
    n1, n8, k = (10, 5, 8) if quick else (30, 15, 8)
    print("real engine (Team on the offline model): supervisor turn, K handoffs of 1 model call, supervisor answer")
    cpu_jobs = [(team(1), n1), (team(k), n8)]
    (e1, _), (ek, _) = await ephemeral(cpu_jobs)
    (d1, _), (dk, _) = await durable(cpu_jobs)
    per_handoff = ((dk - d1) - (ek - e1)) / (k - 1) * 1000
    per_run = (d1 - e1) * 1000 - per_handoff
    print(f"  CPU per run: durable K=1 {d1 * 1000:.1f} ms, K={k} {dk * 1000:.1f} ms; "
          f"--ephemeral K=1 {e1 * 1000:.1f} ms, K={k} {ek * 1000:.1f} ms")  # fmt: skip
    verdict = "ok" if per_handoff <= 10 else "FAIL"
    print(f"  added CPU per run {per_run:.1f} ms, per handoff {per_handoff:.1f} ms; target <= 10 ms/handoff: {verdict}")

    latency = 0.1
    ideal = 3 * latency
    wall_jobs = [(team(32, latency), 3 if quick else 6)]
    ((_, ew),) = await ephemeral(wall_jobs)
    ((_, dw),) = await durable(wall_jobs)
    verdict = "ok" if dw / ideal <= 1.10 else "FAIL"
    print(f"  K=32, L=100 ms: wall/ideal durable {dw / ideal:.3f}, --ephemeral {ew / ideal:.3f} "
          f"(ideal {ideal:.2f} s); target <= 1.10: {verdict}")  # fmt: skip

    slow = [(team(4, 1.0), 1 if quick else 3)]
    ((_, ew),) = await ephemeral(slow)
    ((_, dw),) = await durable(slow)
    added = (dw - ew) / ew * 100
    verdict = "ok" if added < 1 else "FAIL"
    print(f"  1 s model calls, K=4: wall durable {dw:.3f} s, --ephemeral {ew:.3f} s: +{added:.2f} %; "
          f"target < 1 %: {verdict}")  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    sys.exit(anyio.run(main, parser.parse_args().quick))
