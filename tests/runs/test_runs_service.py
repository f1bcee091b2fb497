"""The run service in one process: start/get/list/wait/subscribe, cancellation, follow-up threads, runs
that cannot resume, executor ids, and clear start-up errors (never a traceback, nothing changed)."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunResult
from mcp_team.runs import DurableConfig, durable, open_runs, resolve
from mcp_team.runs.types import RunRequest
from support import HANG_GUARD
from support.durable_engine import FakeEngine

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def _config(tmp_path: Path, **kw: str) -> DurableConfig:
    return resolve(state_dir=tmp_path, environ={}, **kw)


async def test_a_run_is_recorded_from_start_to_finish_and_listed(tmp_path: Path) -> None:
    engine = FakeEngine(k=3, steps=2, latency=0.01)
    async with open_runs(_config(tmp_path), engine) as runs:
        started = await runs.start(RunRequest(request="first request", thread="t1"))
        assert started.status == "running" and started.resumable
        seen = [r.status async for r in runs.subscribe(started.run_id)]
        assert seen[-1] == "complete"
        record = await runs.wait(started.run_id)
        assert record is not None and record.result is not None
        assert [h.status for h in record.result.handoffs] == ["completed"] * 3
        assert record.result.answer.startswith("ans:synthesize")
        listed = await runs.list()
        assert [r.run_id for r in listed] == [started.run_id]
        assert runs.store.writes <= 6  # start, a few coalesced progress writes, the end


async def test_runs_waited_on_or_watched_leave_nothing_behind_in_the_store(tmp_path: Path) -> None:
    # Each subscriber holds an event per run until the run is written again; a finished run never is, so
    # without cleanup every run ever waited on (each run_team call) kept one for the server's lifetime.
    engine = FakeEngine(k=1, steps=1, latency=0.01)
    async with open_runs(_config(tmp_path), engine) as runs:
        for _ in range(3):
            await runs.wait((await runs.start(RunRequest(request="a request"))).run_id)
        engine.latency = 30.0  # still running when the test looks (at 10 ms a loaded machine once saw it end first)
        watch = runs.subscribe((await runs.start(RunRequest(request="left early"))).run_id)
        await anext(watch)
        assert runs.store.watched == 1
        await watch.aclose()  # a client that stops watching before the run ends
        assert runs.store.watched == 0


async def test_closing_right_after_a_run_finished_leaves_its_workflow_ended_not_pending(tmp_path: Path) -> None:
    # `mcp-team run` closes the service as soon as it has the final record, which comes before DBOS has
    # recorded the workflow's end: closing then must not cancel that, or the workflow stays pending and is
    # replayed at the next start.
    config = _config(tmp_path)
    for _ in range(3):
        async with open_runs(config, FakeEngine(k=2, steps=1)) as runs:
            record = await runs.wait((await runs.start(RunRequest(request="a request"))).run_id)
            assert record is not None and record.status == "complete"
    assert config.sqlite_path is not None
    with sqlite3.connect(config.sqlite_path) as db:
        statuses = dict(db.execute("SELECT name, group_concat(status) FROM workflow_status GROUP BY name"))
    # the three runs, each with its two branches (child workflows), all ended
    assert statuses == {"mcp_team.run": "SUCCESS,SUCCESS,SUCCESS", "mcp_team.branch": ",".join(["SUCCESS"] * 6)}


async def test_a_run_whose_end_was_recorded_is_never_run_again(tmp_path: Path) -> None:
    # DBOS may miss a run's end that the run store has (a full disk, a stop in between): it then runs the
    # workflow again at the next start. Its caller had the result; running it again (here on a changed team,
    # which interrupts it) must not overwrite the record.
    config = _config(tmp_path)
    async with open_runs(config, FakeEngine(k=2, steps=1)) as runs:
        done = await runs.wait((await runs.start(RunRequest(request="a request"))).run_id)
    assert done is not None and done.status == "complete"
    assert config.sqlite_path is not None
    with sqlite3.connect(config.sqlite_path) as db:
        db.execute("UPDATE workflow_status SET status = 'PENDING', output = NULL")

    def statuses() -> set[str]:
        with sqlite3.connect(config.sqlite_path) as db:  # type: ignore[arg-type]
            return {row[0] for row in db.execute("SELECT status FROM workflow_status")}

    async with open_runs(config, FakeEngine(k=2, steps=1, team_hash="fake-team-2")) as runs:
        with anyio.fail_after(30):
            while statuses() != {"SUCCESS"} or runs.running:  # noqa: ASYNC110 - polls another writer (DBOS)
                await anyio.sleep(0.05)
        assert await runs.get(done.run_id) == done


_START_ON_A_FULL_DISK = """
import os, resource, signal, sys, anyio
sys.path.insert(0, sys.argv[2])
from support.durable_engine import FakeEngine
from mcp_team.errors import McpTeamError
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest

async def main(state):
    async with open_runs(resolve(state_dir=state, environ={}), FakeEngine(k=2, steps=1)) as runs:
        await runs.wait((await runs.start(RunRequest(request="one"))).run_id, timeout=30)
        # No file may grow now: the database's next write fails as on a full disk (EFBIG, no signal).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        biggest = max(os.path.getsize(os.path.join(state, f)) for f in os.listdir(state))
        resource.setrlimit(resource.RLIMIT_FSIZE, (biggest, resource.RLIM_INFINITY))
        try:
            await runs.start(RunRequest(request="two"))
        except McpTeamError as exc:
            print("REFUSED", exc)
        print("RUNNING", runs.running)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print("CLOSED")

anyio.run(main, sys.argv[1])
"""


def test_a_run_the_database_refuses_to_start_is_a_clear_error_and_leaves_nothing_running(tmp_path: Path) -> None:
    # It was left among the running runs: `close` waited for it for ever (the process hung, SIGTERM or not),
    # and it counted against the server's run limit.
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _START_ON_A_FULL_DISK, str(tmp_path), str(Path(__file__).parents[1])],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[-1] == "CLOSED", proc.stdout + proc.stderr[-2000:]
    assert lines[0].startswith("REFUSED the run could not be started: the runs database sqlite:///"), lines
    assert "Nothing ran" in lines[0] and lines[1] == "RUNNING 0", lines


_RUN_THROUGH_A_FULL_DISK = """
import logging, sqlite3, sys, anyio, sqlalchemy as sa
sys.path.insert(0, sys.argv[2])
from support.durable_engine import FakeEngine
from mcp_team.runs import open_runs, resolve
from mcp_team.runs.types import RunRequest

logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s")
full = False

def disk(conn, cursor, statement, parameters, context, executemany):
    # The disk, not the code: SQLite's own error for a write that needs a page it cannot get.
    if full and statement.lstrip().upper().startswith("INSERT"):
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode, error.sqlite_errorname = 13, "SQLITE_FULL"
        raise error

async def main(state):
    global full
    engine = FakeEngine(k=2, steps=2, latency=0.3)
    async with open_runs(resolve(state_dir=state, environ={}), engine) as runs:
        sa.event.listen(runs.store.engine, "before_cursor_execute", disk)  # DBOS writes through it on SQLite
        run_id = (await runs.start(RunRequest(request="one"))).run_id
        await anyio.sleep(0.4)  # its first calls are in flight
        full = True
        await anyio.sleep(2.0)
        full = False
        record = await runs.wait(run_id, timeout=60)
        print("STATUS", record.status, record.reason)
        print("CALLS", engine.calls)

anyio.run(main, sys.argv[1])
"""


def test_a_run_whose_database_disk_fills_waits_for_space_and_finishes(tmp_path: Path) -> None:
    # DBOS does not retry a write that fails on a full disk: the step failed, and the run with it, for good
    # ("unhandled errors in a TaskGroup"), though every call had finished. Now the run pauses and goes on from
    # its last recorded step once the disk has room.
    import subprocess

    tests = str(Path(__file__).parents[1])
    proc = subprocess.run([sys.executable, "-c", _RUN_THROUGH_A_FULL_DISK, str(tmp_path), tests],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert proc.returncode == 0 and out.get("STATUS") == "complete None", proc.stdout + proc.stderr[-3000:]
    assert "disk is full" in proc.stderr, proc.stderr[-3000:]  # said, with what to do, while it waited
    assert "free some space" in proc.stderr


async def test_a_run_that_crashes_is_failed_in_its_record_and_in_its_result(tmp_path: Path) -> None:
    # an MCP client reads the result: it said `running`, with `isError` false, for a run that had crashed
    class Crashing(FakeEngine):
        async def run(self, *args: object) -> RunResult:
            raise RuntimeError("a bug in an engine")

    async with open_runs(_config(tmp_path), Crashing()) as runs:
        record = await runs.wait((await runs.start(RunRequest(request="a request"))).run_id, timeout=30)
    assert record is not None and record.status == "failed" and record.result is not None
    assert record.result.status == "failed" and "a bug in an engine" in (record.result.stopped_by or ""), record


async def test_a_team_run_whose_model_breaks_keeps_what_had_finished(tmp_path: Path) -> None:
    # A model of one's own raising something unexpected fails the run; its record kept only the reason, not the
    # researcher's finished work.
    from mcp_team.handoffs import Team
    from mcp_team.llm import ModelRequest, ModelResponse, ModelSet
    from mcp_team.llm.offline import OfflineModel
    from mcp_team.runs.team_engine import TeamEngine

    class Broken:
        name, provider = "broken", "mine"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise RuntimeError("a bug in my model")

    offline = OfflineModel()
    models = ModelSet({"supervisor": offline, "specialist": offline}, members={"writer": Broken()})
    async with open_runs(_config(tmp_path), TeamEngine(Team(models))) as runs:
        started = await runs.start(RunRequest(request="Research bees and write a short report"))
        record = await runs.wait(started.run_id, timeout=60)
    assert record is not None and record.status == "failed" and "a bug in my model" in (record.reason or "")
    assert record.result is not None
    assert [(h.target, h.status) for h in record.result.handoffs] == [("researcher", "completed"), ("writer", "failed")]
    assert "## researcher" in record.result.answer, record.result.answer  # what had finished is in the answer


async def test_follow_ups_in_a_thread_see_earlier_requests_and_answers(tmp_path: Path) -> None:
    engine = FakeEngine(k=1, steps=1)
    async with open_runs(_config(tmp_path), engine) as runs:
        first = await runs.start(RunRequest(request="write a poem", thread="t1"))
        await runs.wait(first.run_id)
        await runs.wait((await runs.start(RunRequest(request="unrelated", thread="t2"))).run_id)
        history = await runs.history("t1")
        assert [t.request for t in history.turns] == ["write a poem"]
        assert history.turns[0].answer.startswith("ans:synthesize")


async def test_cancel_stops_in_flight_calls_at_once_and_keeps_what_finished(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine(k=4, steps=2, latency=0.02)
    async with open_runs(_config(tmp_path), engine) as runs:
        record = await runs.start(RunRequest(request="long"), run_id="run-c")
        # let some handoffs finish, then make the rest hang in their model calls
        async for update in runs.subscribe("run-c"):
            if update.result and any(h.status == "completed" for h in update.result.handoffs):
                break
        engine.latency = 3600.0  # the calls still to come hang: only a real cancellation ends them
        cancelled = await runs.cancel(record.run_id)
        assert cancelled is not None and cancelled.status == "cancelled"
        assert cancelled.result is not None
        statuses = {h.status for h in cancelled.result.handoffs}
        assert "completed" in statuses and "running" not in statuses
    # after a restart nothing resumes: the record and DBOS both say cancelled
    engine.latency = 0.0
    async with open_runs(_config(tmp_path), engine) as runs:
        again = await runs.get("run-c")
        assert again is not None and again.status == "cancelled"
        from dbos import DBOS

        status = await DBOS.get_workflow_status_async("run-c")
        assert status is not None and status.status == "CANCELLED"
    # a cancel is no error: DBOS's lines about it (an ERROR with the cancellation, its cancelled tasks) are dropped
    err = capfd.readouterr().err
    assert "ERROR" not in err and "Cancelled" not in err and "cancelled for workflow" not in err, err


async def _cancel_stops_it_while_held(runs: Any, release: Callable[[], None], held: anyio.Event | None = None) -> Any:
    """Cancel run `run-s` and follow it: it must end cancelled while the database work the test holds waits, before
    `release()` lets that work go on. `held`: set once that work began, when it is the cancel's own (then the
    cancel has not returned meanwhile). Returns what the cancel returned."""
    ended: list[Any] = []

    async def cancel() -> None:
        ended.append(await runs.cancel("run-s"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel)
            if held is not None:
                await held.wait()
            with anyio.fail_after(HANG_GUARD):  # before the fixes: the cancel waited for the held work, held here
                async for update in runs.subscribe("run-s"):
                    if update.finished:
                        break
            assert update.status == "cancelled"  # stopped while the held work still waits
            assert held is None or ended == []  # the cancel itself waits for its held write
            release()
    finally:
        release()
    assert ended[0] is not None and ended[0].status == "cancelled", ended
    return ended[0]


async def test_cancel_stops_the_run_while_the_database_records_the_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stops at once, not after DBOS's write of the cancel: on a loaded machine that write once took longer
    than the rest of a run, which then went on through its last model calls and ended complete. Its workflow ends
    only after that write, so DBOS says cancelled all the same."""
    written, release = anyio.Event(), anyio.Event()
    real = durable.cancel_workflow

    async def slow_database(record: Any, *args: Any) -> None:  # the real write, after the run has had its chance
        written.set()
        await release.wait()
        await real(record, *args)

    monkeypatch.setattr(durable, "cancel_workflow", slow_database)
    engine = FakeEngine(k=2, steps=2, latency=3600.0)  # its model calls never return: only a cancel ends them
    async with open_runs(_config(tmp_path), engine) as runs:
        await runs.start(RunRequest(request="long"), run_id="run-s")
        await _cancel_stops_it_while_held(runs, release.set, held=written)
        from dbos import DBOS

        status = await DBOS.get_workflow_status_async("run-s")
        assert status is not None and status.status == "CANCELLED"


async def test_cancel_stops_the_run_before_it_reads_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stops before the cancel reads anything: CI saw `mcp-team run` told SIGTERM go on through its last
    model calls and end complete (exit 0) while the cancel waited on a read of the runs database (whether another
    process had cancelled the run) on a loaded machine."""
    import threading

    release = threading.Event()
    engine = FakeEngine(k=2, steps=2, latency=3600.0)  # its model calls never return: only a cancel ends them
    async with open_runs(_config(tmp_path), engine) as runs:
        await runs.start(RunRequest(request="long"), run_id="run-s")
        real = runs.store.cancelled_among

        def slow_read(run_ids: Any) -> Any:  # the real read, after the run has had its chance
            release.wait(HANG_GUARD)
            return real(run_ids)

        monkeypatch.setattr(runs.store, "cancelled_among", slow_read)
        await _cancel_stops_it_while_held(runs, release.set)


async def test_a_run_that_cannot_resume_is_marked_interrupted_at_the_next_start(tmp_path: Path) -> None:
    engine = FakeEngine(k=2, steps=1, latency=3600.0)
    async with open_runs(_config(tmp_path), engine) as runs:
        await runs.start(RunRequest(request="on the client's model"), run_id="run-s", resumable=False)
        # close() while it runs: it is marked interrupted, never left "running"
    async with open_runs(_config(tmp_path), FakeEngine()) as runs:
        record = await runs.get("run-s")
        assert record is not None and record.status == "interrupted"
        assert "cannot resume" in (record.reason or "")


async def test_an_explicit_executor_id_in_use_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path, executor_id="replica-a")
    async with open_runs(config, FakeEngine()):
        from mcp_team.runs.database import open_engine
        from mcp_team.runs.executor import acquire

        db = open_engine(config)
        with pytest.raises(ConfigError, match="already uses executor id 'replica-a'"):
            acquire(config, db)
        # without an explicit id a second process takes the next free slot
        lease = acquire(replace(config, executor_id=None), db)
        assert lease.executor_id.endswith("-0")
        second = acquire(replace(config, executor_id=None), db)
        assert second.executor_id.endswith("-1")
        lease.release()
        second.release()
        db.dispose()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "unsupported database 'mysql'"),
        ("sqlite://", "the SQLite file needs a path"),
        ("postgresql:///nohost", "needs a host and a database name"),
    ],
)
def test_a_wrong_database_url_is_a_clear_error(tmp_path: Path, url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(state_dir=tmp_path, database_url=url, environ={})


async def _open_fails(config: DurableConfig) -> str:
    with pytest.raises(ConfigError) as info:
        async with open_runs(config, FakeEngine()):
            pass
    return str(info.value)


async def test_a_state_directory_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    message = await _open_fails(_config(blocker / "state"))
    assert f"cannot be created: {blocker} is not a directory" in message and "--state-dir" in message


async def test_unreachable_postgresql_is_a_clear_error(tmp_path: Path) -> None:
    config = resolve(state_dir=tmp_path, database_url="postgresql://u:secret@127.0.0.1:1/runs", environ={})
    message = await _open_fails(config)
    assert "cannot open the runs database" in message and "secret" not in message


async def test_a_database_from_a_newer_mcp_team_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with open_runs(config, FakeEngine(k=1, steps=1)) as runs:
        await runs.wait((await runs.start(RunRequest(request="x"))).run_id)
    db = config.sqlite_path
    assert db is not None
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mcp_team_meta SET value = '99' WHERE key = 'schema_version'")
    before = _dump(db)
    message = await _open_fails(config)
    assert "written by a newer mcp-team" in message and "Nothing was changed" in message
    assert _dump(db) == before


async def test_a_database_from_a_newer_dbos_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with open_runs(config, FakeEngine(k=1, steps=1)):
        pass
    db = config.sqlite_path
    assert db is not None
    with sqlite3.connect(db) as conn:  # as a newer DBOS leaves it (the version of the last to open it)
        conn.execute("UPDATE mcp_team_meta SET value = '99.0.0' WHERE key = 'dbos_version'")
    before = _dump(db)
    message = await _open_fails(config)
    assert "written by a newer DBOS (99.0.0" in message and "Nothing was changed" in message
    assert _dump(db) == before


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


async def test_a_run_left_running_by_a_killed_process_that_cannot_resume_is_interrupted(tmp_path: Path) -> None:
    from mcp_team.runs.types import RunRecord, now

    async with open_runs(_config(tmp_path), FakeEngine()) as runs:
        at = now()
        # as a process killed by SIGKILL leaves it: still "running", nothing in memory
        await runs.store.write(RunRecord(run_id="run-k", status="running", request="r", executor_id=runs.executor_id,
                                         resumable=False, started_at=at, updated_at=at))  # fmt: skip
    async with open_runs(_config(tmp_path), FakeEngine()) as runs:
        record = await runs.get("run-k")
        assert record is not None and record.status == "interrupted" and "cannot resume" in (record.reason or "")


def test_thread_history_keeps_the_newest_turns_within_the_budget() -> None:
    from mcp_team.runs.threads import build_history, compose_request

    turns = [(f"r{i}", f"request {i}", "x" * 10_000) for i in range(10)]
    history = build_history(turns, budget=15_000, turn_chars=6_000)
    assert [t.run_id for t in history.turns] == ["r8", "r9"] and history.omitted == 8
    assert all(len(t.answer) < 6_100 and "left out" in t.answer for t in history.turns)
    text = compose_request("now shorten it", history)
    assert text.index("request 8") < text.index("request 9") < text.index("now shorten it")
    assert "(8 earlier turns left out)" in text
    assert compose_request("alone", build_history([])) == "alone"


def test_cancellation_checks_cover_every_run_in_queries_of_one_size() -> None:
    # One SQL text whatever the number of runs in flight (SQLite caches a statement per text); no run missed.
    from mcp_team.runs.cancels import fixed_chunks

    ids = [f"r{i}" for i in range(130)]
    chunks = fixed_chunks(ids, 64)
    assert {len(c) for c in chunks} == {64} and len(chunks) == 3
    assert set().union(*chunks) == set(ids)
    assert fixed_chunks([], 64) == []
