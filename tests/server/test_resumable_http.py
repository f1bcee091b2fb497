"""Resumable streamable HTTP (issue 11): a client whose SSE stream drops during a long `run_team` reconnects
with Last-Event-ID and receives the progress and the result it missed. Raw HTTP, so every byte on the wire is
what a client of any SDK sees. The store itself is tested through its interface."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp_types import JSONRPCNotification, JSONRPCResponse

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.server.transports.events import MemoryEventStore, SessionEventStore
from mcp_team.server.transports.http import HttpSettings, http_app
from support import HANG_GUARD, clean_env, free_port, initialize, plain_http, plain_http_async, serve_http, serving_here

pytestmark = [pytest.mark.anyio, pytest.mark.process]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    # 50 ms per model call: a run lasts long enough to drop the stream in the middle of it.
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="50")) as base:
        yield base


def _events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """SSE events (id, data, retry) from a line iterator."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        key, _, value = line.partition(":")
        event[key] = event.get(key, "") + value.removeprefix(" ")


def _session(http: httpx2.Client, base: str) -> dict[str, str]:
    init = http.post(f"{base}/mcp", json=initialize(), headers=HEADERS)
    session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    http.post(
        f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**HEADERS, **session}
    )
    return session


def test_a_dropped_stream_resumes_with_the_missed_progress_and_the_result(server: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "run_team",
            "arguments": {"request": "Research bees, calculate 2+2 and write a report"},
            "_meta": {"progressToken": "p"},
        },
    }
    with plain_http(timeout=HANG_GUARD) as http:
        session = _session(http, server)
        first: list[dict[str, str]] = []
        with http.stream("POST", f"{server}/mcp", json=call, headers={**HEADERS, **session}) as response:
            for event in _events(response.iter_lines()):
                first.append(event)
                if '"notifications/progress"' in event.get("data", ""):
                    break  # the connection drops here, in the middle of the run
        priming = first[0]
        assert priming["id"] and priming.get("data", "") == "" and int(priming["retry"]) > 0
        last_id = first[-1]["id"]

        resumed: list[dict[str, str]] = []
        with http.stream("GET", f"{server}/mcp", headers={**HEADERS, **session, "Last-Event-ID": last_id}) as response:
            assert response.status_code == 200
            for event in _events(response.iter_lines()):
                resumed.append(event)
                if '"id":7' in event.get("data", "").replace(" ", ""):
                    break

    messages = [json.loads(e["data"]) for e in resumed if e.get("data")]
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    result = JSONRPCResponse.model_validate(messages[-1])
    assert result.id == 7 and result.result["structuredContent"]["status"] == "complete"
    assert progress, "the progress sent while the client was away is replayed"
    first_progress = json.loads(first[-1]["data"])["params"]["progress"]
    assert progress == sorted(progress) and progress[0] > first_progress  # nothing twice, nothing lost in between
    assert all(e["id"] for e in resumed if e.get("data"))


def test_an_unknown_last_event_id_replays_nothing_and_does_not_fail(server: str) -> None:
    with plain_http(timeout=HANG_GUARD) as http:
        session = _session(http, server)
        with http.stream("GET", f"{server}/mcp", headers={**HEADERS, **session, "Last-Event-ID": "nonsense"}) as r:
            assert r.status_code == 200


def _note(n: int, size: int = 0) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n, "pad": "x" * size})


async def test_the_store_replays_one_streams_events_after_an_id() -> None:
    store = MemoryEventStore()
    priming = await store.store_event("a", None)
    ids = [await store.store_event(stream, _note(n)) for n, stream in enumerate("abab")]
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append((event.event_id, event.message.params["n"]))

    assert await store.replay_events_after(priming, send) == "a"
    assert replayed == [(ids[0], 0), (ids[2], 2)]
    replayed.clear()
    assert await store.replay_events_after(ids[0], send) == "a"
    assert replayed == [(ids[2], 2)]
    assert await store.replay_events_after("999", send) is None


async def test_the_store_is_bounded_in_bytes_and_drops_the_oldest() -> None:
    store = MemoryEventStore(max_bytes=10_000)
    ids = [await store.store_event("s", _note(n, size=1000)) for n in range(50)]
    assert store.size_bytes <= 10_000 and 5 <= store.event_count < 50
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append(event.message.params["n"])

    assert await store.replay_events_after(ids[0], send) is None  # dropped: nothing to say where it was
    await store.replay_events_after(ids[-3], send)
    assert replayed == [48, 49]


def test_a_session_cannot_replay_another_sessions_stream(server: str) -> None:
    """The SDK names a stream by its request id in one store for all sessions; each session has its own view
    (events.scope_per_session), so another client's Last-Event-ID replays nothing of this one's run."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "run_team", "arguments": {"request": "Research the secret plan"}},
    }
    with plain_http(timeout=HANG_GUARD) as http:
        mine, theirs = _session(http, server), _session(http, server)
        with http.stream("POST", f"{server}/mcp", json=call, headers={**HEADERS, **mine}) as response:
            events = [e for e in _events(response.iter_lines()) if e.get("id")]
        assert '"id":7' in events[-1]["data"].replace(" ", "")  # my own stream went to the end
        with http.stream(
            "GET", f"{server}/mcp", headers={**HEADERS, **theirs, "Last-Event-ID": events[0]["id"]}
        ) as response:
            leaked = next((e for e in _events(response.iter_lines()) if e.get("data")), None)
    assert leaked is None  # the stream ends without a message: not theirs to replay


async def test_two_sessions_streams_of_the_same_name_stay_apart() -> None:
    store = MemoryEventStore()
    mine, theirs = SessionEventStore(store, "a"), SessionEventStore(store, "b")
    start = await mine.store_event("7", None)
    await theirs.store_event("7", None)
    ids = [await view.store_event("7", _note(n)) for n, view in enumerate([mine, theirs, mine])]
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append((event.event_id, event.message.params["n"]))

    assert await mine.replay_events_after(start, send) == "7"
    assert replayed == [(ids[0], 0), (ids[2], 2)]
    replayed.clear()
    assert await theirs.replay_events_after(start, send) is None and replayed == []


async def test_each_stream_is_bounded_and_keeps_its_newest_event() -> None:
    store = MemoryEventStore(max_stream_bytes=5_000)
    for n in range(20):
        await store.store_event("big", _note(n, size=1000))
    small = await store.store_event("small", _note(0))
    assert store.size_bytes < 5_000 + 1_000 + 200  # the big stream's cap, and the small stream
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append(event.message.params["n"])

    assert await store.replay_events_after(small, send) == "small"  # the small stream kept everything
    huge = await store.store_event("huge", _note(99, size=10_000))
    assert store.event_count >= 3 and huge  # alone over the cap, a stream's newest event is still kept


async def test_a_finished_stream_is_dropped_after_a_while() -> None:
    now = [0.0]
    store = MemoryEventStore(finished_keep_seconds=300, clock=lambda: now[0])
    first = await store.store_event("done", None)
    await store.store_event("done", JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
    await store.store_event("running", _note(1))
    now[0] = 299.0
    await store.store_event("running", _note(2))
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append(event.message)

    assert await store.replay_events_after(first, send) == "done" and len(replayed) == 1  # the answer is kept
    now[0] = 301.0
    await store.store_event("running", _note(3))
    assert await store.replay_events_after(first, send) is None  # dropped whole, once the time was up
    assert store.stream_count == 1 and store.event_count == 3  # the running stream keeps all it had


async def test_a_sessions_streams_are_dropped_with_it_and_only_its_own() -> None:
    store = MemoryEventStore()
    mine, theirs = SessionEventStore(store, "a"), SessionEventStore(store, "b")
    for view in (mine, theirs):
        await view.store_event("7", _note(1))
        await view.store_event("_GET_stream", _note(2))
    kept = await theirs.store_event("7", _note(3))
    store.forget("a/")
    assert store.stream_count == 2 and store.event_count == 3
    assert store.size_bytes == 3 * (await _sized(_note(1)))
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append(event.message.params["n"])

    assert await theirs.replay_events_after(str(int(kept) - 2), send) == "7" and replayed == [3]


async def _sized(message: JSONRPCNotification) -> int:
    alone = MemoryEventStore()
    await alone.store_event("s", message)
    return alone.size_bytes


async def test_a_standalone_streams_events_age_out_like_a_finished_stream() -> None:
    """The GET stream never ends with an answer: its events go `finished_keep_seconds` after they came, oldest
    first; a request's stream still running keeps all it has."""
    now = [0.0]
    store = MemoryEventStore(finished_keep_seconds=60, clock=lambda: now[0])
    old = await store.store_event("s/_GET_stream", _note(1))
    await store.store_event("s/7", _note(2))
    now[0] = 30.0
    recent = await store.store_event("s/_GET_stream", _note(3))
    now[0] = 61.0
    await store.store_event("s/7", _note(4))
    replayed: list[Any] = []

    async def send(event: Any) -> None:
        replayed.append(event.message.params["n"])

    assert store.event_count == 3  # the first notification went, the running request's stream kept both
    assert await store.replay_events_after(old, send) is None
    assert await store.replay_events_after(recent, send) == "s/_GET_stream" and replayed == []
    now[0] = 91.0
    await store.store_event("s/7", _note(5))
    assert store.stream_count == 1 and store.event_count == 3


def _prefixes(store: Any) -> set[str]:
    return {name.split("/", 1)[0] for name in store._streams}


async def test_a_session_ended_by_its_client_leaves_none_of_its_events_on_the_server() -> None:
    """Through a real server (in this process, so its store can be looked at): a session that ran the team and
    was closed with DELETE leaves no stream; a session still open keeps its own."""
    port = free_port()
    server = build_server(ModelSettings(model="offline"))
    app = http_app(server, HttpSettings(port=port))
    store = server.session_manager.event_store
    url = f"http://127.0.0.1:{port}/mcp"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_team", "arguments": {"request": "Research bees"}}}  # fmt: skip
    async with serving_here(app, port), plain_http_async(timeout=HANG_GUARD) as http:
        sessions = []
        for _ in range(2):
            init = await http.post(url, json=initialize(), headers=HEADERS)
            session = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}  # fmt: skip
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            answer = await http.post(url, json=call, headers=session)
            assert '"status":"complete"' in answer.text.replace(" ", ""), answer.text[-500:]
            sessions.append(session)
        ended, open_ = (s["mcp-session-id"] for s in sessions)
        assert _prefixes(store) == {ended, open_}  # both have streams: the run's progress and answer
        assert (await http.delete(url, headers=sessions[0])).status_code == 200
        with anyio.fail_after(HANG_GUARD):
            while ended in _prefixes(store):  # noqa: ASYNC110 (the session ends in the server's task)
                await anyio.sleep(0.02)
        assert _prefixes(store) == {open_}
