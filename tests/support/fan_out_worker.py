"""A K=8 fan-out run in durable_worker.py, to kill -9 and resume: started, its logged calls, its result, checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.stacks import communicate_or_stacks

WORKER = Path(__file__).parent / "durable_worker.py"
K, STEPS = 8, 4
CALLS = 1 + K * (STEPS + 2) + 1  # plan, per branch: model steps and 2 tools, synthesis


def start_worker(
    state: Path, log: Path, mode: str, *extra: str, latency: float = 0.05, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    args = [sys.executable, str(WORKER), str(state), mode, "run-1", str(K), str(STEPS), str(latency), str(log), *extra]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})  # fmt: skip


def logged_calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def kill_after(proc: subprocess.Popen[str], log: Path, n: int) -> int:
    while len(logged_calls(log)) < n:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return len(logged_calls(log))


def result_of(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = communicate_or_stacks(proc, 90)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result; stderr:\n{err[-3000:]}"
    record: dict[str, object] = json.loads(lines[-1][7:])
    return record


def check_branches(record: dict[str, object]) -> None:
    result = record["result"]
    assert isinstance(result, dict)
    outputs = {h["id"]: h["output"] for h in result["handoffs"]}
    for seq in range(K):
        expected = [f"ans:b{seq} s{i}" for i in range(STEPS)] + [f"tool:{seq}:{j}" for j in range(2)]
        assert outputs[f"h{seq + 1}"].split(" | ")[:-1] == expected, outputs
    assert "got" not in str(result["answer"]), result["answer"]
