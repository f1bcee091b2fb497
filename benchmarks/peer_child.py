"""One measurement of one framework, in a fresh process: `python peer_child.py FRAMEWORK KIND ...`.

Kinds (the result is one JSON line on stdout):
- `cold`: import the framework, build a K=1 team, run it once; prints the import time. The parent
  times the whole process, from spawn to this line (cold start).
- `cpu K RUNS REPEATS`: CPU per run at latency 0 (median over REPEATS of RUNS runs each, after
  warm-ups, `gc.collect()` before each repeat; `process_time` counts every thread, so mcp-team's
  span exporter thread is in) and the peak RSS of the process at the end.
- `wall LEVELS LATENCY REPEATS`: wall time per run (median), LEVELS like `32` or `2,1,1`.
Every kind checks the model calls each framework made against the workload; a mismatch is an error.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import statistics
import sys
import time
from importlib import import_module

import frameworks

# What "importing the framework" means for each: the modules its workload uses.
IMPORTS = {
    "mcp-team": ["mcp_team.handoffs", "mcp_team.llm", "opentelemetry.sdk.trace"],
    "openai-agents": ["agents"],
    "pydantic-ai": ["pydantic_ai", "pydantic_ai.models.function"],
    "langgraph-supervisor": ["langgraph_supervisor", "langgraph.prebuilt"],
}


def _check(calls: frameworks.Calls, levels: list[int], runs: int, name: str) -> None:
    want_sup, want_workers = calls.expected(levels, runs)
    if calls.worker != want_workers or calls.supervisor != want_sup:
        raise RuntimeError(
            f"{name} made {calls.supervisor / runs:g} supervisor and {calls.worker / runs:g} worker model calls a run "
            f"on levels {levels}, where the workload is {want_sup // runs} and {want_workers // runs}"
            + (" (its handoffs of one response did not run together)" if calls.supervisor > want_sup else "")
        )


def _flush() -> None:
    """mcp-team's batch span processor exports on a thread: its work belongs inside the window."""
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush()


async def _runs(run_once: frameworks.RunOnce, n: int) -> None:
    for _ in range(n):
        await run_once()


def main(argv: list[str]) -> dict[str, object]:
    name, kind, *rest = argv
    t0 = time.perf_counter()
    for module in IMPORTS[name]:
        import_module(module)
    import_s = time.perf_counter() - t0
    build = frameworks.BUILDERS[name]
    if kind == "cold":
        run_once, calls = build([1], 0.0)
        asyncio.run(run_once())
        _check(calls, [1], 1, name)
        return {"import_s": import_s}
    if kind == "cpu":
        k, runs, repeats = int(rest[0]), int(rest[1]), int(rest[2])
        run_once, calls = build([k], 0.0)
        per_run: list[float] = []

        async def measure() -> None:
            await _runs(run_once, max(5, runs // 4))  # warm-up: lazy imports, schema caches
            _flush()
            for _ in range(repeats):
                gc.collect()
                c0 = time.process_time()
                await _runs(run_once, runs)
                _flush()
                per_run.append((time.process_time() - c0) / runs)

        asyncio.run(measure())
        _check(calls, [k], max(5, runs // 4) + runs * repeats, name)
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"cpu_s": statistics.median(per_run), "all_s": per_run, "peak_rss_mib": rss_kib / 1024}
    if kind == "wall":
        levels = [int(x) for x in rest[0].split(",")]
        latency, repeats = float(rest[1]), int(rest[2])
        run_once, calls = build(levels, latency)
        walls: list[float] = []

        async def measure_wall() -> None:
            await run_once()  # warm-up
            for _ in range(repeats):
                gc.collect()
                w0 = time.perf_counter()
                await run_once()
                walls.append(time.perf_counter() - w0)

        asyncio.run(measure_wall())
        _check(calls, levels, repeats + 1, name)
        return {"wall_s": statistics.median(walls), "all_s": walls}
    raise SystemExit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    try:
        out = main(sys.argv[1:])
    except Exception as exc:  # the parent reports it as "not measured", with why
        out = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps(out), flush=True)
