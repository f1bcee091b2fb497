"""The runs recorded in tests/recordings/: made through the anthropic backend against the fake Messages API
(tests/support/fake_messages_api.py, the offline model as its brain), with `mcp-team run --record`, as a user would.

The recordings are regression tests (tests/evals/test_recordings.py replays them with no model at all): a change
to a prompt, a tool or the engine that changes what the team asks its model makes them fail with the
first difference. When the change is intended, record them again:

    .venv/bin/python tests/support/recorded_runs.py
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a script: `support`
from support import MCP_TEAM, clean_env
from support.fake_api import offline_brain
from support.fake_messages_api import FakeMessagesAPI

RECORDINGS = Path(__file__).parents[1] / "recordings"
API_KEY = "sk-ant-test-RECORDING-0123456789"
FULL = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."


@dataclass(frozen=True)
class Case:
    name: str
    request: str
    mode: str = "adaptive"
    faults: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return RECORDINGS / f"{self.name}.jsonl"


CASES = (
    Case("adaptive-parallel", FULL),  # researcher and analyst at once, then the writer, then the reviewer
    Case("planned-dag", FULL, mode="planned"),  # the plan's DAG: two first tasks, the writer after both
    Case("retry-after-fault", "Research bees and calculate 2+2", faults=("rate_limit:researcher:1",)),
)


def record(case: Case, path: Path, api: FakeMessagesAPI) -> subprocess.CompletedProcess[str]:
    """`mcp-team run --record path` on the anthropic backend, against `api`."""
    faults = [arg for fault in case.faults for arg in ("--fault", fault)]
    return subprocess.run(
        [MCP_TEAM, "run", "--json", "--quiet", "--record", str(path), "--mode", case.mode, *faults, case.request],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=api.base_url),
    )


def main() -> None:
    RECORDINGS.mkdir(exist_ok=True)
    with FakeMessagesAPI(brain=offline_brain) as api:
        for case in CASES:
            proc = record(case, case.path, api)
            if proc.returncode not in (0, 3):
                raise SystemExit(f"{case.name}: mcp-team run failed ({proc.returncode}):\n{proc.stderr}")
            print(f"recorded {case.path}")


if __name__ == "__main__":
    main()
