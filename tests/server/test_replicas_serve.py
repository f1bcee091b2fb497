"""Two `mcp-team serve --http` replicas (subprocesses, each with its own executor id) on one real PostgreSQL
started by the test, driven by MCP clients over HTTP: a run started on one is listed, read (waiting),
followed (`resources/subscribe`, and `subscriptions/listen`) and cancelled on the replica not running it,
and stops where it runs; a replica killed with `kill -9` mid-run has its run taken over and finished by the
other (or resumed when it restarts with its id), and the offline model's call log (tests/support/logged_serve.py)
shows that no handoff that had finished asked its model again; an endpoint's requests per minute and
MCP_TEAM_GLOBAL_MAX_RUNS hold across both replicas; a checkpoint is answered on the replica not running the
run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_team.llm import ModelRequest, ModelResponse
from mcp_team.llm.offline import OfflineModel
from support import HANG_GUARD
from support.fake_openai_api import FakeOpenAIAPI
from support.postgres import Postgres, postgres
from support.replicas import REQUEST, TEAM, K, Replica, call, calls, connect, replica, runs_of, until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.postgres,
]

LISTENED = "Each of you: compute 5*9 and report."  # a run of its own on replicas that ran REQUEST's
# A whole run of TEAM: the supervisor's turn, the fan-out, the supervisor's final turn.
WHOLE_RUN_CALLS = 1 + K + 1 + 1


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        yield server


def runner_of(tmp_path: Path, a: Replica, b: Replica, about: str = "") -> tuple[Replica, Replica]:
    """(the replica executing the run, the other one): the queue lets either take it; the log says which."""
    first = calls(tmp_path, about)[0]["pid"]
    assert first in (a.pid, b.pid), first
    return (a, b) if first == a.pid else (b, a)


def finished_targets(record: dict[str, Any]) -> set[str]:
    return {h["target"] for h in record["handoffs"] if h["status"] == "completed"}


async def test_a_run_started_on_one_replica_is_read_followed_and_cancelled_on_the_other(
    pg: Postgres, tmp_path: Path
) -> None:
    """Then, on the same two replicas (a pair each start costs seconds of CPU, and more as they idle), a run
    followed with 2026-07-28 `subscriptions/listen` (`_followed_with_listen`)."""
    database = pg.url("cancel")
    # 2.5 s a model call: the run (four calls deep) is still going after the reads and the subscription
    slow = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_OFFLINE_LATENCY_MS": "2500"}
    with (
        replica("replica-a", database, tmp_path, **slow) as a,
        replica("replica-b", database, tmp_path, **slow) as b,
    ):
        updates: dict[str, list[str]] = {a.name: [], b.name: []}

        def collect(name: str) -> Callable[[object], Any]:
            async def on_message(message: object) -> None:
                if isinstance(message, types.ResourceUpdatedNotification):
                    updates[name].append(str(message.params.uri))

            return on_message

        async with connect(a, message_handler=collect(a.name)) as ca, connect(b, message_handler=collect(b.name)) as cb:
            clients = {a.name: ca, b.name: cb}
            run_id = (await call(ca, "start_run", request=REQUEST))["run_id"]
            await until("the run's first model call", lambda: calls(tmp_path), a, b)
            runner, other = runner_of(tmp_path, a, b)
            here, there = clients[runner.name], clients[other.name]  # `there` never runs it: all goes through PG
            uri = f"team://runs/{run_id}"

            # read on both: the record, the list, a bounded wait that ends with the run still going
            for client in (here, there):
                seen = await call(client, "get_run", run_id=run_id)
                assert seen["status"] == "running", seen
                assert [(r["run_id"], r["status"]) for r in await runs_of(client)] == [(run_id, "running")]
            assert (await call(there, "get_run", run_id=run_id, wait_seconds=0.5))["status"] == "running"

            # follow on the other replica: changes the runner writes reach its subscriber
            await there.subscribe_resource(uri)
            await until("an update of the run on the other replica", lambda: updates[other.name], a, b)
            assert set(updates[other.name]) == {uri}

            waited: dict[str, Any] = {}

            async def wait_there() -> None:  # get_run waiting on the other replica, ended by the cancel
                waited.update(await call(there, "get_run", run_id=run_id, wait_seconds=50))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_there)
                await anyio.sleep(0.2)
                assert not waited
                before, told = len(calls(tmp_path)), len(updates[other.name])
                cancelled = await call(there, "cancel_run", run_id=run_id)
                assert before < WHOLE_RUN_CALLS, "the run ended before the cancel: nothing was tested"
                assert cancelled["status"] == "cancelled", cancelled
            assert waited["status"] == "cancelled", waited
            await until("the cancel told to the subscriber", lambda: len(updates[other.name]) > told, a, b)

            # it stops where it runs: the runner's own view is its live run until it has stopped it
            stopped = await until(
                "the runner to stop the run",
                lambda: _status_is(here, run_id, "cancelled"),
                a,
                b,
            )
            assert (await call(here, "get_run", run_id=run_id))["reason"] == "cancelled with cancel_run"  # not lost
            after_stop = len(calls(tmp_path))
            await anyio.sleep(2 * 2.5 + 1.0)  # longer than any model call: one still going would be logged
            assert len(calls(tmp_path)) == after_stop, calls(tmp_path)[after_stop:]
            assert after_stop < WHOLE_RUN_CALLS, "the run went on to the end"
            for client in (here, there):
                final = await call(client, "get_run", run_id=run_id)
                assert final["status"] == "cancelled", final
                assert [(r["run_id"], r["status"]) for r in await runs_of(client)] == [(run_id, "cancelled")]
            assert stopped["status"] == "cancelled"
            assert {c["pid"] for c in calls(tmp_path)} == {runner.pid}  # only the runner ever ran it

            await _followed_with_listen(tmp_path, a, b, ca)


async def _followed_with_listen(tmp_path: Path, a: Replica, b: Replica, ca: Client) -> None:
    """2026-07-28: a `subscriptions/listen` stream on the other replica hears of the runner's changes (its
    finished handoffs) and of the end, not only of writes made where the stream is. A run of its own (5*9)."""
    run_id = (await call(ca, "start_run", request=LISTENED))["run_id"]
    await until("the listened run's first model call", lambda: calls(tmp_path, "5*9"), a, b)
    runner, other = runner_of(tmp_path, a, b, "5*9")
    uri = f"team://runs/{run_id}"
    async with Client(other.url, cache=None) as client:  # 2026-07-28
        events: list[str] = []
        seen: list[str] = []
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            with anyio.fail_after(HANG_GUARD):
                async for event in subscription:
                    events.append(str(getattr(event, "uri", "")))
                    record = await call(client, "get_run", run_id=run_id)
                    seen.append(f"{record['status']}:{len(finished_targets(record))}")
                    if record["status"] != "running":
                        break
    assert set(events) == {uri}, ("listen", events)
    assert seen[-1] == f"complete:{K}", ("listen", seen)
    assert any(s.startswith("running:") for s in seen), ("listen", seen)  # told while it ran on the other replica
    assert {c["pid"] for c in calls(tmp_path, "5*9")} == {runner.pid}, "listen"


async def _status_is(client: Client, run_id: str, status: str) -> dict[str, Any] | None:
    # Not get_run's wait: it answers with the stored record, finished as the cancel wrote it, where the runner's
    # own view (its live run) is what is awaited here.
    record = await call(client, "get_run", run_id=run_id)
    return record if record["status"] == status else None


async def _kill_the_runner_mid_run(
    tmp_path: Path, *replicas: tuple[Replica, Client]
) -> tuple[str, Replica, Replica, set[str]]:
    """start_run, then kill -9 whichever replica runs it once K-1 handoffs finished: (run id, the killed
    replica, the other one, the handoffs finished at the kill)."""
    (a, ca), (b, cb) = replicas
    run_id = (await call(ca, "start_run", request=REQUEST))["run_id"]
    await until("the run's first model call", lambda: calls(tmp_path), a, b)
    runner, other = runner_of(tmp_path, a, b)
    there = cb if other is b else ca

    async def most_finished() -> bool:
        return len(finished_targets(await call(there, "get_run", run_id=run_id))) >= K - 1

    await until("K-1 finished handoffs", most_finished, a, b)
    runner.kill()
    at_kill = await call(there, "get_run", run_id=run_id)
    assert at_kill["status"] == "running", "the run ended before the kill: nothing was tested"
    return run_id, runner, other, finished_targets(at_kill)


async def test_a_replica_killed_mid_run_has_its_run_finished_by_the_other(pg: Postgres, tmp_path: Path) -> None:
    database = pg.url("takeover")
    short = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_LEASE_SECONDS": "2", "MCP_TEAM_OFFLINE_LATENCY_MS": "2000"}
    with replica("replica-a", database, tmp_path, **short) as a, replica("replica-b", database, tmp_path, **short) as b:
        async with connect(a) as ca, connect(b) as cb:
            run_id, runner, survivor, finished = await _kill_the_runner_mid_run(tmp_path, (a, ca), (b, cb))
            there = cb if survivor is b else ca
            calls_at_kill = calls(tmp_path)

            record = await until(
                "the run finished by the survivor",
                lambda: _finished(there, run_id),
                survivor,
            )
    assert record["status"] == "complete", record
    outputs = {h["target"]: h["output"] for h in record["handoffs"] if h["status"] == "completed"}
    assert set(outputs) == {f"w{i}" for i in range(1, K + 1)}, record["handoffs"]
    for target, output in outputs.items():  # each its own answer, none lost or mixed up in the takeover
        assert output.startswith(f"[offline {target}] Notes on:"), (target, output)
    assert "6*7 = 42" in outputs["w1"]
    log = calls(tmp_path)
    again = [c for c in log if c["pid"] == survivor.pid]
    assert again, "the survivor called no model: the run was not taken over"
    assert {c["pid"] for c in calls_at_kill} == {runner.pid}
    rerun = {c["member"] for c in again} & finished
    assert not rerun, f"handoffs that had finished asked their model again: {rerun} ({finished=})"
    # the supervisor's first turn (recorded before the kill) was not asked again: only its final turn ran
    supervisor = [c for c in log if c["member"] not in outputs]
    assert [c["pid"] for c in supervisor] == [runner.pid, survivor.pid], supervisor


async def _finished(client: Client, run_id: str) -> dict[str, Any] | None:
    record = await call(client, "get_run", run_id=run_id, wait_seconds=5)
    return record if record["status"] != "running" else None


def _finished_on(client: Client, run_id: str) -> Callable[[], Any]:
    return lambda: _finished(client, run_id)


async def test_the_requests_per_minute_of_an_endpoint_hold_across_both_replicas(pg: Postgres, tmp_path: Path) -> None:
    """Both replicas run runs on one OpenAI-compatible endpoint (the fake server) limited to 240 requests a
    minute (4/s, bursts of one second's worth): the requests the server counts keep that rate together.
    Each replica alone would send them as fast as the runs ask (its own limiter allows 240 at once)."""
    arrivals: list[tuple[float, str]] = []

    def brain(request: ModelRequest) -> ModelResponse:
        return anyio.run(OfflineModel().complete, request)

    rate, burst, runs_each = 240.0, 4, 2
    with FakeOpenAIAPI(brain=brain) as api:
        serve = api._serve

        def counted(path: str, raw: bytes, headers: dict[str, str]) -> Any:  # when each request came, from whom
            arrivals.append((time.monotonic(), headers["authorization"]))
            return serve(path, raw, headers)

        api._serve = counted  # type: ignore[method-assign]
        limits = json.dumps({api.base_url: {"requests_per_minute": rate}})
        team = '[models]\nsupervisor = "openai:gpt-4o-mini"\nspecialist = "openai:gpt-4o-mini"\n\n' + TEAM
        # each replica takes two of the four runs from the queue, so both call the endpoint
        env = {"OPENAI_BASE_URL": api.base_url, "MCP_TEAM_ENDPOINT_LIMITS": limits,
               "MCP_TEAM_RUNS_PER_REPLICA": str(runs_each)}  # fmt: skip
        database = pg.url("rate")
        with (
            replica("replica-a", database, tmp_path, team, OPENAI_API_KEY="key-a", **env) as a,
            replica("replica-b", database, tmp_path, team, OPENAI_API_KEY="key-b", **env) as b,
        ):
            async with connect(a) as ca, connect(b) as cb:
                started = [await call(c, "start_run", request=REQUEST) for c in (ca, cb) for _ in range(runs_each)]
                for run in started:
                    done = await until("the run", _finished_on(ca, run["run_id"]), a, b)
                    assert done["status"] == "complete", done
    n = 2 * runs_each * WHOLE_RUN_CALLS
    assert len(arrivals) == n, len(arrivals)
    assert {who for _, who in arrivals} == {"Bearer key-a", "Bearer key-b"}  # both replicas called the endpoint
    times = sorted(t for t, _ in arrivals)
    per_second = rate / 60
    # lasting: n requests at 4/s after a burst take this long at least, whatever the machine's load (each
    # replica alone would have sent its half in a burst; two per-replica rates would take half as long)
    assert times[-1] - times[0] >= (n - burst) / per_second - 1.0, [round(t - times[0], 2) for t in times]
    # and never faster over 2 s: a burst plus 2 s at the rate, plus 4 for granted requests that reached the
    # server late (a replica slowed down by a loaded machine), together with the next ones
    for i, t in enumerate(times):
        window = [u for u in times[i:] if u - t <= 2.0]
        assert len(window) <= burst + per_second * 2.0 + 4, (i, [round(u - times[0], 2) for u in times])


async def test_a_checkpoint_is_answered_on_the_replica_not_running_the_run(pg: Postgres, tmp_path: Path) -> None:
    """A started run waits at a checkpoint on whichever replica took it; a person's answer_checkpoint reaching
    the other replica is passed on through the database: a revise (its feedback reaches the task) and then an
    approve, each taken by the runner, which finishes the run. A checkpoint the run does not show first is
    refused there, saying where the run waits."""
    database = pg.url("answer")
    team = '[supervisor]\ncheckpoints = ["before:w2"]\n' + TEAM
    env = {"MCP_TEAM_MODEL": "offline"}
    with (
        replica("replica-a", database, tmp_path, team, **env) as a,
        replica("replica-b", database, tmp_path, team, **env) as b,
    ):
        async with connect(a) as ca, connect(b) as cb:
            run_id = (await call(ca, "start_run", request=REQUEST))["run_id"]
            await until("the run's first model call", lambda: calls(tmp_path), a, b)
            runner, other = runner_of(tmp_path, a, b)
            there = {a.name: ca, b.name: cb}[other.name]

            async def waiting(round_: int) -> dict[str, Any] | None:
                view = await call(there, "get_run", run_id=run_id)
                return view if (view.get("waiting") or {}).get("round") == round_ else None

            await until("the run waiting at before:w2", lambda: waiting(1), a, b)
            wrong = await there.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "approve",
                                                                "checkpoint": "plan"})  # fmt: skip
            assert wrong.is_error, wrong
            assert f"runs on replica {runner.name}" in str(wrong.content) and "before:w2" in str(wrong.content)
            revised = await call(there, "answer_checkpoint", run_id=run_id, decision="revise", feedback="use metres")
            assert revised["status"] == "running", revised
            await until("the run waiting at before:w2 again", lambda: waiting(2), a, b)
            retried = await there.call_tool("answer_checkpoint", {"run_id": run_id, "decision": "revise",
                                                                  "feedback": "use metres", "round": 1})  # fmt: skip
            assert retried.is_error and "it waits at 'before:w2' in round 2" in str(retried.content), retried
            await call(there, "answer_checkpoint", run_id=run_id, decision="approve")

            done = await until("the run's end", _finished_on(there, run_id), a, b)
    assert done["status"] == "complete", done
    answers = [(c["name"], c["round"], c["action"]) for c in done["checkpoints"]]
    assert answers == [("before:w2", 1, "revise"), ("before:w2", 2, "approve")]
    assert "use metres" in next(h for h in done["handoffs"] if h["target"] == "w2")["task"]
    assert {c["pid"] for c in calls(tmp_path)} == {runner.pid}  # the answers went across; the run stayed


async def test_the_global_run_limit_holds_across_replicas_and_a_queued_run_is_cancelled_elsewhere(
    pg: Postgres, tmp_path: Path
) -> None:
    """MCP_TEAM_GLOBAL_MAX_RUNS=1 on two replicas: of two runs started on different replicas, one executes
    at a time (their model calls never interleave in the log); a third, still queued, cancelled on the other
    replica, never runs anywhere."""
    database = pg.url("queue")
    env = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_OFFLINE_LATENCY_MS": "300", "MCP_TEAM_GLOBAL_MAX_RUNS": "1"}
    requests = {n: f"Each of you: compute {n} and report." for n in ("6*7", "5*9", "3*3")}
    with replica("replica-a", database, tmp_path, **env) as a, replica("replica-b", database, tmp_path, **env) as b:
        async with connect(a) as ca, connect(b) as cb:
            first = (await call(ca, "start_run", request=requests["6*7"]))["run_id"]
            second = (await call(cb, "start_run", request=requests["5*9"]))["run_id"]
            queued = (await call(ca, "start_run", request=requests["3*3"]))["run_id"]
            cancelled = await call(cb, "cancel_run", run_id=queued)
            assert cancelled["status"] == "cancelled", cancelled
            done = [await until("a run", _finished_on(cb, run_id), a, b) for run_id in (first, second)]
            assert [d["status"] for d in done] == ["complete", "complete"], done
            await anyio.sleep(2.0)  # a queue poll or two: a cancelled run that was taken would have begun
            assert (await call(ca, "get_run", run_id=queued))["status"] == "cancelled"
    which = ["".join(n for n in requests if n in c["task"]) for c in calls(tmp_path)]
    assert all(len(w) == 3 for w in which), which  # every call names its run's expression
    assert "3*3" not in which, which  # the cancelled run never ran
    assert len(which) == 2 * WHOLE_RUN_CALLS, which
    blocks = [w for i, w in enumerate(which) if i == 0 or which[i - 1] != w]
    assert len(blocks) == 2, which  # one run after the other, never both at once


async def test_a_replica_killed_mid_run_and_restarted_with_its_id_has_its_run_resumed(
    pg: Postgres, tmp_path: Path
) -> None:
    """kill -9 of the runner, restarted at once with its executor id (well within its 10 s lease): the restart
    resumes its run (DBOS puts a recovered run back on the shared queue, so either replica may go on with it)
    and it completes with no finished handoff run again."""
    database = pg.url("restart")
    env = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_OFFLINE_LATENCY_MS": "2000", "MCP_TEAM_LEASE_SECONDS": "10"}
    with replica("replica-a", database, tmp_path, **env) as a, replica("replica-b", database, tmp_path, **env) as b:
        async with connect(a) as ca, connect(b) as cb:
            run_id, runner, other, finished = await _kill_the_runner_mid_run(tmp_path, (a, ca), (b, cb))
            with replica(runner.name, database, tmp_path, **env) as again:
                async with connect(again) as client:
                    record = await until("the resumed run", _finished_on(client, run_id), again, other)
    assert record["status"] == "complete", record
    assert {h["target"] for h in record["handoffs"] if h["status"] == "completed"} == {f"w{i}" for i in range(1, K + 1)}
    log = calls(tmp_path)
    resumed = [c for c in log if c["pid"] != runner.pid]
    assert resumed, "no replica called a model after the kill: the run was not resumed"
    assert {c["pid"] for c in resumed} <= {again.pid, other.pid}
    rerun = {c["member"] for c in resumed} & finished
    assert not rerun, f"handoffs that had finished asked their model again: {rerun} ({finished=})"
