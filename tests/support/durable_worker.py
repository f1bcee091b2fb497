"""A process that runs one durable run of the fake engine (tests kill it with SIGKILL and start it again).

Usage: durable_worker.py STATE_DIR MODE(start|resume) RUN_ID K STEPS LATENCY LOG [APP_VERSION] [TEAM_HASH]
Prints `RESULT <record json>` when the run has finished.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import anyio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mcp_team
from support import stacks

if os.environ.get("MCP_TEAM_TEST_RELEASE"):  # as an older release of mcp-team would run it
    mcp_team.__version__ = os.environ["MCP_TEAM_TEST_RELEASE"]

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine


async def main() -> None:
    stacks.install()  # kill -USR1/-USR2: where it sits, should it not end
    state, mode, run_id, k, steps, latency, log = sys.argv[1:8]
    env = {k: v for k, v in os.environ.items() if k == "MCP_TEAM_DATABASE_URL"}
    config = resolve(state_dir=state, executor_id="worker-1", environ=env)
    if len(sys.argv) > 8 and sys.argv[8]:
        config = replace(config, app_version=sys.argv[8])
    engine = FakeEngine(k=int(k), steps=int(steps), latency=float(latency), log=log)
    if len(sys.argv) > 9 and sys.argv[9]:
        engine.team_hash = sys.argv[9]
    async with open_runs(config, engine) as runs:
        if mode == "start":
            await runs.start(RunRequest(request="fan out"), run_id=run_id)
            print("STARTED", flush=True)
        record = await runs.wait(run_id)
        assert record is not None
        print("RESULT", record.model_dump_json(), flush=True)


anyio.run(main)
