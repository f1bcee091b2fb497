"""The replica matrix of issue 32, on a real PostgreSQL started by the test: two `mcp-team serve --http` replicas
(A and B, each its own executor id), 10 durable runs started on A (a K=4 fan-out each, a run's own numbers in its
request), two more cancelled while they run: one through A, one through B. A client of each replica follows every
run with `get_run`; once most runs have finished some handoffs, A is killed with `kill -9`, and B takes its runs
over (its lease lapses) and completes them.

Checked: every run of the 10 ends complete, with every handoff either client saw `completed` unchanged in every
field in every later view and in the final record, and each handoff's own answer; its record says B took it over
(once). No model call whose step DBOS had recorded at the kill is made again (the offline model's call log,
tests/support/logged_serve.py, gives each call the digest its step is named by), and B makes none twice. The
cancelled runs
stay cancelled: their records as they were, their workflows cancelled, no model call of theirs on B, never resumed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from mcp import Client

from support import HANG_GUARD
from support.postgres import Postgres, postgres
from support.replicas import Replica, call, calls, connect, replica

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.process,
    pytest.mark.postgres,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

RUNS = 10
K = 4
# w1 calls its calculator before answering (two model calls), the others answer at once: a run has finished
# handoffs and one in flight for a while.
TEAM = "\n".join(
    f'[[specialists]]\nname = "w{i}"\ndescription = "Worker {i}."\nprompt = "You are worker {i}."\n'
    + ('tools = ["calculate"]\n' if i == 1 else "")
    for i in range(1, K + 1)
)
# Every run's calls at once (the default 8 in flight would make the last runs start as the first end).
# Room on A for every run (the default, 4 per CPU, would queue some for B to take before the kill).
ENV = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_LEASE_SECONDS": "2", "MCP_TEAM_OFFLINE_LATENCY_MS": "3000",
       "MCP_TEAM_MAX_CONCURRENCY": "64", "MCP_TEAM_RUNS_PER_REPLICA": "16"}  # fmt: skip
POLL = 0.25  # seconds between a client's looks at the runs it follows


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        yield server


def _request(n: int) -> str:
    return f"Each of you: compute {n}*7 and report."  # a run's own numbers: its calls are told apart in the log


def _completed(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["id"]: h for h in view.get("handoffs", []) if h["status"] == "completed"}


class Seen:
    """Every handoff a client saw completed, as first seen; any later view that differs is a problem."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], dict[str, Any]] = {}
        self.problems: list[str] = []

    def note(self, run_id: str, view: dict[str, Any], where: str) -> None:
        for hid, handoff in _completed(view).items():
            first = self.first.setdefault((run_id, hid), handoff)
            if first != handoff:
                self.problems.append(f"run {run_id}: handoff {hid}, seen completed, changed ({where}):\n"
                                     f"  first: {json.dumps(first)}\n  now:   {json.dumps(handoff)}")  # fmt: skip


async def _look(clients: list[Client], run_ids: list[str], seen: Seen, where: str) -> dict[str, dict[str, Any]]:
    views: dict[str, dict[str, Any]] = {}

    async def look(client: Client, run_id: str) -> None:
        views[run_id] = view = await call(client, "get_run", run_id=run_id)
        seen.note(run_id, view, where)

    async with anyio.create_task_group() as tg:  # at once: one look at every run takes one round trip
        for client in clients:
            for run_id in run_ids:
                tg.start_soon(look, client, run_id)
    return views


def _db(pg: Postgres, database: str) -> sa.Engine:
    return sa.create_engine(pg.url(database).replace("postgresql://", "postgresql+psycopg://"))


def _recorded_steps(db: sa.Engine) -> set[str]:
    """Digests of the model steps DBOS has recorded (`model:<model>:<digest>`, runs/runtime.py)."""
    with db.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT function_name FROM dbos.operation_outputs WHERE function_name LIKE 'model:%'")
        )
        return {name.rsplit(":", 1)[1] for (name,) in rows}


def _records(db: sa.Engine) -> dict[str, dict[str, Any]]:
    with db.connect() as conn:
        return {
            rid: json.loads(text) for rid, text in conn.execute(sa.text("SELECT run_id, record FROM mcp_team_runs"))
        }


def _workflows(db: sa.Engine) -> dict[str, str]:
    with db.connect() as conn:
        return dict(conn.execute(sa.text("SELECT workflow_uuid, status FROM dbos.workflow_status")).all())  # type: ignore[arg-type]


async def _until(what: str, done: Any, *alive: Replica) -> None:
    with anyio.fail_after(HANG_GUARD, shield=False):
        while not await done():
            for r in alive:
                assert r.proc.poll() is None, f"replica {r.name} exited while waiting for {what}:\n{r.output()}"
            await anyio.sleep(POLL)


async def test_a_replica_killed_with_10_runs_has_them_completed_by_the_other(pg: Postgres, tmp_path: Path) -> None:
    database = "matrix"
    db = _db(pg, database)
    seen = Seen()
    with replica("replica-a", pg.url(database), tmp_path, TEAM, **ENV) as a, \
         replica("replica-b", pg.url(database), tmp_path, TEAM, **ENV) as b:  # fmt: skip
        async with connect(a) as ca, connect(b) as cb:
            numbers = [*range(1, RUNS + 1), 101, 102]  # the last two: cancelled on A, and on B
            started: dict[int, str] = {}

            async def start(n: int) -> None:
                started[n] = (await call(ca, "start_run", request=_request(n)))["run_id"]

            async with anyio.create_task_group() as tg:  # at once: they run side by side on A
                for n in numbers:
                    tg.start_soon(start, n)
            *runs, cancelled_here, cancelled_there = every = [started[n] for n in numbers]

            async def mid_way() -> bool:  # most runs have finished handoffs, none has ended
                views = await _look([ca, cb], every, seen, "before the kill")
                return sum(bool(_completed(views[r])) for r in runs) >= RUNS // 2

            await _until("handoffs finished in most runs", mid_way, a, b)
            gone_here = await call(ca, "cancel_run", run_id=cancelled_here)
            gone_there = await call(cb, "cancel_run", run_id=cancelled_there)  # a run of A, cancelled through B
            assert gone_here["status"] == gone_there["status"] == "cancelled", (gone_here, gone_there)
            at_kill = await _look([ca, cb], every, seen, "at the kill")
            # every run ran on A so far (a run started where there is room runs there)
            assert {c["pid"] for c in calls(tmp_path)} == {a.pid}, "a run started on A ran elsewhere"
            a.kill()
            recorded_at_kill = _recorded_steps(db)
            records_at_kill = _records(db)
            states = [(at_kill[r]["status"], len(_completed(at_kill[r]))) for r in runs]
            assert all(at_kill[r]["status"] == "running" for r in runs), f"a run ended before the kill: {states}"

            async def all_done() -> bool:
                views = await _look([cb], every, seen, "after the kill")
                return all(views[r]["status"] != "running" for r in runs)

            await _until("B completes A's runs", all_done, b)
            final = await _look([cb], every, seen, "at the end")
            for run_id in (cancelled_here, cancelled_there):  # still so once B has taken A's runs over
                final[run_id] = await call(cb, "get_run", run_id=run_id)
    problems = list(seen.problems)
    records, workflows = _records(db), _workflows(db)
    log = calls(tmp_path)
    on_b = [c for c in log if c["pid"] == b.pid]
    for n, run_id in enumerate(runs, 1):
        record = records[run_id]
        if record["status"] != "complete":
            problems.append(f"run {run_id} ended {record['status']}: {record.get('reason')}")
            continue
        outputs = {h["target"]: h["output"] for h in record["result"]["handoffs"] if h["status"] == "completed"}
        if set(outputs) != {f"w{i}" for i in range(1, K + 1)} or f"{n}*7 = {n * 7}" not in outputs["w1"]:
            problems.append(f"run {run_id}: not each worker's own answer: {outputs}")
        stored = {h["id"]: h for h in record["result"]["handoffs"]}
        for (rid, hid), first in seen.first.items():
            if rid == run_id and stored.get(hid) != first:
                problems.append(f"run {run_id}: handoff {hid}, seen completed, differs in the final record:\n"
                                f"  seen:  {json.dumps(first)}\n  final: {json.dumps(stored.get(hid))}")  # fmt: skip
        resumed = record.get("resumed") or []
        if [(r["how"], r["by"]) for r in resumed] != [("takeover", "replica-b")]:
            problems.append(f"run {run_id}: its record does not say B took it over once: {resumed}")
    again = [c for c in on_b if c["digest"] in recorded_at_kill]
    if again:
        problems.append(f"model calls recorded before the kill made again on B: {[c['task'][:50] for c in again]}")
    twice = [d for d, count in Counter(c["digest"] for c in on_b).items() if count > 1]
    if twice:
        problems.append(f"B made model calls twice: {twice}")
    if not on_b:
        problems.append("B made no model call: nothing was taken over")
    for run_id, n in ((cancelled_here, 101), (cancelled_there, 102)):
        if records[run_id] != records_at_kill[run_id] or final[run_id]["status"] != "cancelled":
            problems.append(f"cancelled run {run_id} changed after the kill: {records[run_id]}")
        if any(f"{n}*7" in c["task"] for c in on_b):
            problems.append(f"cancelled run {run_id} made model calls on B: it was resumed")
        if workflows.get(run_id) != "CANCELLED" or records[run_id].get("resumed"):
            problems.append(f"cancelled run {run_id}: workflow {workflows.get(run_id)}, {records[run_id]}")
    pending = [w for w, status in workflows.items() if status in ("PENDING", "ENQUEUED")]
    if pending:
        problems.append(f"workflows left pending: {pending}")
    assert not problems, "\n\n".join(problems)
    print(f"at the kill, handoffs completed per run: {states}; B made {len(on_b)} model calls")
