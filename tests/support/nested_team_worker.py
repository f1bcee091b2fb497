"""A process that runs one durable run of a team with teams inside it (issue 13) through the run service;
tests kill it with SIGKILL and start it again.

Usage: nested_team_worker.py STATE_DIR MODE(start|resume) RUN_ID DEPTH LATENCY LOG
The tree, for DEPTH 3: the run's members a1, a2 and team_b; team_b's b1, b2 and team_c; team_c's c1, c2
(odd workers call their calculator first). Every finished model call appends `{"member", "digest", "pid"}`
to LOG, `digest` as in the durable step's name. Prints `RESULT <record json>`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import anyio

from mcp_team.handoffs import RunSettings, Team
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.team_engine import TeamEngine
from mcp_team.runs.types import RunRequest
from mcp_team.specialists import Specialist
from mcp_team.specialists.calculator import CALCULATE

LEVELS = "abcde"


class LoggedOffline(OfflineModel):
    log: str = ""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        digest = hashlib.blake2b(request.model_dump_json().encode(), digest_size=6).hexdigest()
        with open(self.log, "a") as f:  # noqa: ASYNC230 - a short append, as a test log
            f.write(json.dumps({"member": request.member, "digest": digest, "pid": os.getpid()}) + "\n")
        return response


def members(level: int, depth: int) -> list[Specialist]:
    """The members of the team at `level` (0: the run's own) of a tree `depth` deep."""
    tag = LEVELS[level]
    workers: list[Specialist] = [
        Specialist(
            name=f"{tag}{i}",
            description=f"worker {tag}{i}",
            system_prompt=f"You are worker {tag}{i}.",
            tools=(CALCULATE,) if i % 2 else (),
        )
        for i in (1, 2)
    ]
    if level + 1 < depth:
        inner = LEVELS[level + 1]
        workers.append(
            SubTeam(
                name=f"team_{inner}",
                description=f"team {inner}",
                system_prompt=f"You lead team {inner}.",
                members=tuple(members(level + 1, depth)),
            )
        )
    return workers


async def main() -> None:
    state, mode, run_id, depth, latency, log = sys.argv[1:7]
    model = LoggedOffline(latency=float(latency))
    model.log = log
    team = Team(ModelSet.single(model, max_concurrency=64), members(0, int(depth)), RunSettings())
    config = resolve(state_dir=state, executor_id="worker-1", environ={})
    async with open_runs(config, TeamEngine(team)) as runs:
        if mode == "start":
            await runs.start(RunRequest(request="Each of you: compute 6*7 and report."), run_id=run_id)
            print("STARTED", flush=True)
        record = await runs.wait(run_id)
        assert record is not None
        print("RESULT", record.model_dump_json(), flush=True)


anyio.run(main)
