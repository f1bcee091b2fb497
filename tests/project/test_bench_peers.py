"""The side-by-side bench: mcp-team does the shared workload, and the report claims only what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import HANG_GUARD, clean_env

BENCH = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import peers  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

pytestmark = [pytest.mark.process]


def child(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "peer_child.py"), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_env(),
        cwd=BENCH,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_mcp_team_does_the_workload_with_its_call_counts_checked() -> None:
    assert "import_s" in child("mcp-team", "cold")
    cpu = child("mcp-team", "cpu", "8", "4", "2")
    assert "error" not in cpu and float(cpu["cpu_s"]) > 0 and float(cpu["peak_rss_mib"]) > 0
    wall = child("mcp-team", "wall", "2,1,1", "0.01", "1")
    assert "error" not in wall and float(wall["wall_s"]) >= 7 * 0.01  # 7 calls in series


def test_a_failed_measurement_is_reported_not_raised() -> None:
    assert "no-such-framework" in str(child("no-such-framework", "cold")["error"])


def figures(name: str, cpu_ms: tuple[float, float, float], error: str | None = None) -> peers.Figures:
    fig = peers.Figures(name, "1.0", error=error)
    fig.cpu = {k: [ms / 1e3] for k, ms in zip(peers.KS, cpu_ms, strict=True)}
    fig.rss, fig.imports, fig.cold = [40.0], [0.3], [0.8]
    fig.wall = {label: [calls * peers.LATENCY * 1.02] for label, (_, calls) in peers.WALL_SCENARIOS.items()}
    return fig


def test_without_peers_the_report_says_they_were_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    peers.report([figures("mcp-team", (0.5, 2.0, 7.0))], rounds=1, repeats=1)
    out = capsys.readouterr().out
    assert "Peers were not measured" in out and "pip install -e '.[bench]'" in out
    assert "how many times" not in out


def test_ratios_only_for_peers_measured_in_this_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    ours = figures("mcp-team", (0.5, 2.0, 7.0))
    measured = figures("openai-agents", (5.0, 20.0, 70.0))
    failed = figures("langgraph-supervisor", (0, 0, 0), error="made 33 supervisor calls; the workload is 2")
    peers.report([ours, measured, failed], rounds=1, repeats=1)
    out = capsys.readouterr().out
    assert "openai-agents          per handoff 10.0x" in out
    assert "langgraph-supervisor 1.0: NOT MEASURED" in out and "33 supervisor calls" in out
    assert "langgraph-supervisor   per handoff" not in out
