"""Do replicas share the load? `.venv/bin/python benchmarks/replicas_share.py [--runs N] [--per-replica N]`

Starts a throwaway PostgreSQL 15 (tests/support/postgres.py) and real `mcp-team serve --http` replicas on it, with the
offline model at zero latency (a CPU-bound load: every run is Python work, no waiting on a model). Every run is
started on the first replica with `start_run`, as a client behind a sticky balancer does; what that replica
does not take at once goes on the shared queue, where a replica with room takes it. Measured: runs per second
from the first start to the last finish, with one replica and with two, and how many runs each replica ran.

The default of `MCP_TEAM_RUNS_PER_REPLICA` (4 per CPU, runs/config.py) is used unless `--per-replica`
says otherwise; `--per-replica 0` is the old default, no cap. On a machine with fewer cores than replicas plus
PostgreSQL plus this script, two replicas cannot reach twice one's throughput whatever they do: the figure
printed says how many cores the process may use.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support import MCP_TEAM, clean_env, free_port, plain_http, wait_healthy  # noqa: E402
from support.postgres import postgres  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
REQUEST = "Research the history of bees and calculate 17*23"


class Mcp:
    """A 2025-11-25 session over plain HTTP, answers read from the SSE body."""

    def __init__(self, base: str) -> None:
        self.url, self.http, self.n = f"{base}/mcp", plain_http(timeout=300), 0
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        opened = self.http.post(self.url, headers=HEADERS, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                                   "params": hello})  # fmt: skip
        self.headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"],
                        "mcp-protocol-version": "2025-11-25"}  # fmt: skip
        self.http.post(self.url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        self.n += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.n,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        answer = self.http.post(self.url, headers=self.headers, json=body)
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        result = json.loads(data[-1])["result"]
        if result.get("isError"):
            raise RuntimeError(result["content"][0]["text"])
        return result["structuredContent"]  # type: ignore[no-any-return]


@contextmanager
def replica(name: str, url: str, log: Path, per_replica: int | None):
    port = free_port()
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_DATABASE_URL=url, MCP_TEAM_EXECUTOR_ID=name,
                    MCP_TEAM_MAX_RUNS="1000")  # fmt: skip
    if per_replica is not None:
        env["MCP_TEAM_RUNS_PER_REPLICA"] = str(per_replica) if per_replica > 0 else "100000"
    with log.open("wb") as err:
        proc = subprocess.Popen([MCP_TEAM, "serve", "--http", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            if not wait_healthy(base, proc):
                raise RuntimeError(f"replica {name} did not start: {log.read_text()[-2000:]}")
            client = Mcp(base)
            deadline = time.monotonic() + 60
            while plain_http(timeout=5).get(f"{base}/readyz").status_code != 200:  # joined the others
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica {name} not ready: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            yield client
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def throughput(url: str, replicas: int, runs: int, tmp: Path, per_replica: int | None) -> tuple[float, Counter[str]]:
    with ExitStack() as stack:
        clients = [stack.enter_context(replica(f"r{i}", url, tmp / f"r{replicas}-{i}.log", per_replica))
                   for i in range(replicas)]  # fmt: skip
        head = clients[0]
        warm = head.call("start_run", request="warm up")["run_id"]
        head.call("get_run", run_id=warm, wait_seconds=50)
        started = time.perf_counter()
        ids = [head.call("start_run", request=f"{REQUEST} ({i})")["run_id"] for i in range(runs)]
        where: Counter[str] = Counter()
        for run_id in ids:
            record = head.call("get_run", run_id=run_id, wait_seconds=50)
            while record["status"] == "running":
                record = head.call("get_run", run_id=run_id, wait_seconds=50)
            assert record["status"] == "complete", record
        elapsed = time.perf_counter() - started
        import sqlalchemy as sa

        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT executor_id, workflow_uuid FROM dbos.workflow_status")).all()
        engine.dispose()
        wanted = set(ids)
        for executor, workflow in rows:
            if workflow in wanted:
                where[executor.split("+")[0]] += 1
    return runs / elapsed, where


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--per-replica", type=int, default=None, help="MCP_TEAM_RUNS_PER_REPLICA (0: no cap)")
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    with postgres() as pg, tempfile.TemporaryDirectory() as d:
        one, _ = throughput(pg.url("share_one"), 1, args.runs, Path(d), args.per_replica)
        two, where = throughput(pg.url("share_two"), 2, args.runs, Path(d), args.per_replica)
    cap = {None: "default (4 per CPU)", 0: "no cap"}.get(args.per_replica, str(args.per_replica))
    print(f"{args.runs} CPU-bound offline runs, all started on the first replica, runs per replica: {cap}, "
          f"{cpus} CPUs for this process, load average {os.getloadavg()[0]:.1f}:")  # fmt: skip
    print(f"  1 replica {one:.2f} runs/s, 2 replicas {two:.2f} runs/s ({two / one:.2f}x); ran: "
          + ", ".join(f"{name} {n}" for name, n in sorted(where.items())))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
