"""mcp-team and its peers, measured side by side on one workload in the same sweep.

Each measurement runs in a fresh process (`peer_child.py`), and the frameworks take turns within
every round (the order rotates), so drift on a shared machine hits all of them alike. Figures are
medians over rounds. Only frameworks that are installed are measured (`pip install -e '.[bench]'`
adds the peers); ratios are printed only against a peer measured in this run, and no peer figure
is written anywhere in this code.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from cold_start import compile_package
from frameworks import DISTRIBUTIONS

HERE = Path(__file__).parent
OURS = "mcp-team"
KS = (1, 8, 32)
RUNS = {1: 100, 8: 40, 32: 12}  # runs per repeat, per K
LATENCY = 0.1
WALL_SCENARIOS = {"fan-out K=32": ([32], 3), "3-level DAG 2,1,1": ([2, 1, 1], 7)}  # levels, calls on the path


@dataclass
class Figures:
    name: str
    version: str
    cpu: dict[int, list[float]] = field(default_factory=dict)  # K -> per-round medians, seconds per run
    rss: list[float] = field(default_factory=list)
    wall: dict[str, list[float]] = field(default_factory=dict)
    imports: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    error: str | None = None

    def med(self, values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    def fit(self) -> tuple[float, float]:
        """Least squares CPU(K) = fixed + per_handoff*K over the K medians, in seconds."""
        xs = [k for k in KS if self.cpu.get(k)]
        ys = [self.med(self.cpu[k]) for k in xs]
        if len(xs) < 2:
            return float("nan"), float("nan")
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        return my - b * mx, b


def installed() -> list[Figures]:
    out = []
    for name, dist in DISTRIBUTIONS.items():
        try:
            out.append(Figures(name, version(dist)))
        except PackageNotFoundError:
            continue
    return out


def child(fig: Figures, *args: str) -> dict[str, float] | None:
    """One fresh process; None (and the framework marked not measured) when it failed."""
    if fig.error:
        return None
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(HERE / "peer_child.py"), fig.name, *args],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=600,
    )
    elapsed = time.perf_counter() - t0
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        out = {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    if "error" in out:
        fig.error = str(out["error"])
        return None
    out["process_s"] = elapsed
    return out


def sweep(figs: list[Figures], rounds: int, repeats: int) -> None:
    for rnd in range(rounds):
        order = figs[rnd % len(figs) :] + figs[: rnd % len(figs)]
        for fig in order:
            if (cold := child(fig, "cold")) is not None:
                fig.cold.append(cold["process_s"])
                fig.imports.append(cold["import_s"])
        for k in KS:
            for fig in order:
                if (out := child(fig, "cpu", str(k), str(RUNS[k]), str(repeats))) is not None:
                    fig.cpu.setdefault(k, []).append(out["cpu_s"])
                    if k == max(KS):
                        fig.rss.append(out["peak_rss_mib"])
        for label, (levels, _) in WALL_SCENARIOS.items():
            for fig in order:
                lv = ",".join(map(str, levels))
                if (out := child(fig, "wall", lv, str(LATENCY), str(repeats))) is not None:
                    fig.wall.setdefault(label, []).append(out["wall_s"])
        print(f"   round {rnd + 1}/{rounds} done", file=sys.stderr, flush=True)


def _ratio(peer: float, ours: float) -> str:
    # A fitted intercept can come out negative when a framework's cost grows faster than linearly in K:
    # no ratio then (the K=1 figure is the one to compare).
    return f"{peer / ours:.1f}x" if ours > 0 and peer > 0 else "-"


def report(figs: list[Figures], rounds: int, repeats: int) -> None:
    ours = next(f for f in figs if f.name == OURS)
    peers = [f for f in figs if f.name != OURS and not f.error]
    print(
        f"   {rounds} rounds; in each, every framework in a fresh process per figure, order rotating; "
        f"medians over rounds (each round: the median of {repeats} repeats)"
    )
    print("   mcp-team: tracing ON (SDK provider, batch processor, counting exporter); peers: their tracing off")
    cols = [f for f in figs if not f.error]
    print("   " + f"{'figure':<36}" + "".join(f"{f'{f.name} {f.version}':>26}" for f in cols))

    def row(label: str, values: list[float], fmt: str) -> None:
        print("   " + f"{label:<36}" + "".join(f"{format(v, fmt):>26}" for v in values))

    for k in KS:
        row(f"CPU ms per run, K={k}", [f.med(f.cpu.get(k, [])) * 1e3 for f in cols], ".3f")
    row("fixed CPU ms per run (fitted)", [f.fit()[0] * 1e3 for f in cols], ".3f")
    row("CPU ms per handoff (fitted)", [f.fit()[1] * 1e3 for f in cols], ".3f")
    for label, (_, calls) in WALL_SCENARIOS.items():
        row(
            f"wall / {calls}x{LATENCY:g}s, {label}",
            [f.med(f.wall.get(label, [])) / (calls * LATENCY) for f in cols],
            ".3f",
        )
    row(f"peak RSS MiB (K={max(KS)} process)", [f.med(f.rss) for f in cols], ".1f")
    row("import s", [f.med(f.imports) for f in cols], ".3f")
    row("cold start s (spawn to 1st run)", [f.med(f.cold) for f in cols], ".3f")
    for f in figs:
        if f.error:
            print(f"   {f.name} {f.version}: NOT MEASURED, its run failed the workload check: {f.error}")
    if ours.error:
        print("   mcp-team itself failed the workload check: no ratios.")
        return
    if not peers:
        print("   Peers were not measured (none installed: pip install -e '.[bench]'); no ratios.")
        return
    fixed, marginal = ours.fit()
    print("   how many times mcp-team's figure each measured peer's is:")
    for p in peers:
        pf, pm = p.fit()
        walls = "  ".join(
            f"wall {label}: {_ratio(p.med(p.wall.get(label, [])), ours.med(ours.wall.get(label, [])))}"
            for label in WALL_SCENARIOS
        )
        print(
            f"   {p.name:<22} per handoff {_ratio(pm, marginal)}, fixed {_ratio(pf, fixed)}, "
            f"K=1 run {_ratio(p.med(p.cpu.get(1, [])), ours.med(ours.cpu.get(1, [])))}, "
            f"RSS {_ratio(p.med(p.rss), ours.med(ours.rss))}, {walls}"
        )


def main(rounds: int = 3, repeats: int = 5) -> int:
    figs = installed()
    compile_package()  # the peers' site-packages are compiled: import ours on the same terms
    sweep(figs, rounds, repeats)
    report(figs, rounds, repeats)
    return 1 if next(f for f in figs if f.name == OURS).error else 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
