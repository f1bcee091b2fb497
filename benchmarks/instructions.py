"""Instructions per handoff under valgrind: figures that machine noise does not move.

`.venv/bin/python benchmarks/instructions.py` runs the K=32 fan-out of `run.py` (offline model, zero
latency) under `valgrind --tool=callgrind` twice per set-up, with 2 and 12 measured runs after the same
warm-up, and prints (instructions of the longer - the shorter) / (10 runs x 32 handoffs): the machine
instructions one handoff costs, fixed costs of a run spread over its 32 handoffs. CPU time on a shared
2-core box varies by 30% from one minute to the next; these counts repeat to within 0.1%, so they tell
whether a change made the engine cheaper. Set-ups:
- tracing off (no provider);
- tracing on (the SDK's `Tracer.start_span`, its default sampler);
- the floor, tracing on: what any engine with this span structure on anyio pays per handoff, and nothing
  else: one task in an anyio task group and the handoff's three spans (`execute_tool transfer_to_*`,
  `invoke_agent`, `chat` with its usage), made by mcp-team's span helpers, inside a run's span. No
  records, requests, model or budgets: the engine's own work is the traced figure minus this one.
The traced set-ups use the SDK provider, a batch processor and a span-counting exporter, as `run.py`.
Needs valgrind (Debian package `valgrind`); says so and exits 0 without it. Takes two minutes on a quiet machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

K, SHORT, LONG = 32, 2, 12
SETUPS = {
    "off": "tracing off",
    "on": "tracing on",
    "floor": "floor: an anyio task + 3 spans",
}


def child(setup: str, runs: int) -> None:
    """In the process valgrind runs: warm up, then `runs` runs of the K-wide fan-out."""
    import anyio

    sys.path.insert(0, str(Path(__file__).parent))
    import run as bench

    if setup != "off":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(bench.CountingExporter(), max_queue_size=1 << 16))
        trace.set_tracer_provider(provider)
    if setup == "floor":
        go = floor_runs
    else:
        team = bench.fanout_team(K)

        async def go(n: int) -> None:
            for _ in range(n):
                result = await team.run(bench.REQUEST)
                if result.status != "complete" or len(result.handoffs) != K:
                    raise SystemExit(f"run {result.status} with {len(result.handoffs)} handoffs, expected {K}")

    anyio.run(go, 3)
    anyio.run(go, runs)


async def floor_runs(n: int) -> None:
    """`n` runs of the floor set-up: per handoff one anyio task and the three spans a handoff has."""
    import anyio

    from mcp_team.telemetry import spans
    from mcp_team.telemetry.attributes import RESPONSE_MODEL

    async def handoff(i: int, done: list[int]) -> None:
        with (
            spans.transfer_span("supervisor", "worker", f"call_{i}", f"h{i}", 1),
            spans.agent_span("worker", description="a worker"),
            spans.chat_span("offline", "offline", "specialist", 1024) as span,
        ):
            spans.record_usage(span, 10, 20, 0, 0, {RESPONSE_MODEL: "offline"})
            done.append(i)

    for _ in range(n):
        done: list[int] = []
        with spans.agent_span("supervisor"):
            async with anyio.create_task_group() as tg:
                for i in range(K):
                    tg.start_soon(handoff, i, done)
        if len(done) != K:
            raise SystemExit(f"floor run made {len(done)} handoffs, expected {K}")


def instructions(setup: str, runs: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, setup, str(runs)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same string hashes, so the same dict and set probes
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run of {setup!r} failed: {out.stderr[-800:]}")
    return int(found.group(1))


def main() -> int:
    if shutil.which("valgrind") is None:
        print("instructions per handoff: NOT MEASURED, valgrind is not installed (Debian: apt install valgrind)")
        return 0
    jobs = [(setup, runs) for setup in SETUPS for runs in (SHORT, LONG)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: instructions(*job), jobs), strict=True))
    per = {setup: (counts[setup, LONG] - counts[setup, SHORT]) / ((LONG - SHORT) * K) for setup in SETUPS}
    print(f"instructions per handoff, K={K} fan-out, offline model (valgrind callgrind, {LONG} - {SHORT} runs):")
    for setup, label in SETUPS.items():
        print(f"  {label:<36} {per[setup] / 1000:8.0f} k")
    print(f"  tracing's own cost: {(per['on'] - per['off']) / 1000:.0f} k")
    print(
        f"  the engine's own work above the floor: {(per['on'] - per['floor']) / 1000:.0f} k "
        f"(the floor is {per['floor'] / per['on']:.0%} of a traced handoff)"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3:
        child(sys.argv[1], int(sys.argv[2]))
    else:
        sys.exit(main())
