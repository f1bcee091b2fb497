"""A process making N concurrent model calls through the endpoint limiter, its request rate shared with
other processes through PostgreSQL (`runs.shared_limits`), as every replica's engine does.

Usage: shared_rate_worker.py DATABASE_URL BASE_URL N REQUESTS_PER_MINUTE START_AT. One warm-up call first
(unlimited, its text "warm-up": the client's first connection is slow, and a grant spent waiting for it
would reach the server late), then the N calls at the wall-clock time START_AT. Prints `DONE <n>`.
"""

from __future__ import annotations

import sys
import time

import anyio

from mcp_team.llm import Message, ModelRequest
from mcp_team.llm.limits import EndpointLimits, Limiters
from mcp_team.llm.openai import OpenAIModel
from mcp_team.runs.config import normalize_url
from mcp_team.runs.database import postgres_engine
from mcp_team.runs.shared_limits import PostgresRate


async def main() -> None:
    url, base_url, n, rpm, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    rate = PostgresRate(postgres_engine(normalize_url(url), pool_size=8))
    rate.create()
    limiters = Limiters(EndpointLimits(max_concurrency=64, requests_per_minute=rpm))
    limiters.share(rate)
    model = OpenAIModel("gpt-4o-mini", base_url=base_url)
    done = 0
    await model.complete(ModelRequest(system="s", messages=[Message(role="user", content="warm-up")]))
    await anyio.sleep(max(start_at - time.time(), 0))

    async def call(i: int) -> None:
        nonlocal done
        async with limiters.for_model(model).slot():
            await model.complete(ModelRequest(system="s", messages=[Message(role="user", content=f"call {i}")]))
        done += 1

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(call, i)
    print("DONE", done, flush=True)


anyio.run(main)
