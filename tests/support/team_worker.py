"""A process that runs one durable run of the REAL engine (a `Team` of K custom specialists on the offline
model with latency) through the run service; tests kill it with SIGKILL and start it again.

Usage: team_worker.py STATE_DIR MODE(start|resume) RUN_ID K LATENCY LOG [MODE [DEADLINE_SECONDS]]
Every finished model call appends `{"member", "phase", "pid"}` to LOG. Prints `RESULT <record json>`.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: `support`

from mcp_team.handoffs import Budgets, RunSettings, Team
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.team_engine import TeamEngine
from mcp_team.runs.types import RunRequest
from mcp_team.specialists import Specialist
from mcp_team.specialists.calculator import CALCULATE
from support import stacks


class LoggedOffline(OfflineModel):
    log: str = ""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        with open(self.log, "a") as f:  # noqa: ASYNC230 - a short append, as a test log
            f.write(json.dumps({"member": request.member, "phase": request.phase, "pid": os.getpid()}) + "\n")
        return response


def team(k: int, latency: float, log: str, deadline: float = 600.0) -> Team:
    model = LoggedOffline(latency=latency)
    model.log = log
    specialists = [
        # odd workers call their calculator before answering (two model calls), even ones answer at once: the
        # even ones have finished while the odd ones still run
        Specialist(
            name=f"w{i}",
            description=f"worker {i}",
            system_prompt=f"You are worker {i}.",
            tools=(CALCULATE,) if i % 2 else (),
        )
        for i in range(1, k + 1)
    ]
    settings = RunSettings(budgets=Budgets(deadline_seconds=deadline))
    return Team(ModelSet.single(model, max_concurrency=64), specialists, settings)


async def main() -> None:
    stacks.install()  # kill -USR1/-USR2: where it sits, should it not end
    state, mode, run_id, k, latency, log = sys.argv[1:7]
    run_mode = sys.argv[7] if len(sys.argv) > 7 else None
    deadline = float(sys.argv[8]) if len(sys.argv) > 8 else 600.0
    config = resolve(state_dir=state, executor_id="worker-1", environ={})
    engine = TeamEngine(team(int(k), float(latency), log, deadline))
    async with open_runs(config, engine) as runs:
        if mode == "start":
            asked = RunRequest(request="Each of you: compute 6*7 and report.", mode=run_mode)  # type: ignore[arg-type]
            await runs.start(asked, run_id=run_id)
            print("STARTED", flush=True)
        record = await runs.wait(run_id)
        assert record is not None
        print("RESULT", record.model_dump_json(), flush=True)


if __name__ == "__main__":
    anyio.run(main)
