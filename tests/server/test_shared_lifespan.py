"""`SharedLifespan`'s edges that clients cannot force: an entry made while the set-up is still under way, a
set-up that fails, an entry made while the last one's teardown runs, and a first entry whose exit is
cancelled while another entry is in (see tests/server/test_clients_at_once.py for the server itself)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from mcp_team.server.shared_lifespan import SharedLifespan
from support import HANG_GUARD

pytestmark = pytest.mark.anyio


class Recorded:
    """A lifespan that records its set-ups and teardowns, each held at a gate until the test opens it."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.set_ups = 0
        self.set_up_gate, self.teardown_gate = anyio.Event(), anyio.Event()
        self.set_up_gate.set()
        self.teardown_gate.set()
        self.fail_next = False

    @asynccontextmanager
    async def __call__(self, server: str) -> AsyncIterator[str]:
        self.set_ups += 1
        state = f"{server}-{self.set_ups}"
        self.log.append(f"set up {state}")
        await self.set_up_gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError(f"{state} failed")
        try:
            yield state
        finally:
            self.log.append(f"tearing down {state}")
            await self.teardown_gate.wait()
            self.log.append(f"torn down {state}")


async def held(lifespan: SharedLifespan[str, str], got: list[str], leave: anyio.Event) -> None:
    async with lifespan("s") as state:
        got.append(state)
        await leave.wait()


async def test_an_entry_made_during_the_set_up_waits_for_it_and_shares_it() -> None:
    recorded = Recorded()
    recorded.set_up_gate = anyio.Event()
    lifespan = SharedLifespan(recorded)
    got: list[str] = []
    leave = anyio.Event()
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(held, lifespan, got, leave)
            await anyio.wait_all_tasks_blocked()  # the first is setting up
            tg.start_soon(held, lifespan, got, leave)
            await anyio.wait_all_tasks_blocked()
            assert got == [] and recorded.set_ups == 1
            recorded.set_up_gate.set()
            await anyio.wait_all_tasks_blocked()
            assert got == ["s-1", "s-1"]
            leave.set()
    assert recorded.log == ["set up s-1", "tearing down s-1", "torn down s-1"]


async def test_entries_waiting_on_a_failed_set_up_each_try_their_own() -> None:
    recorded = Recorded()
    recorded.set_up_gate, recorded.fail_next = anyio.Event(), True
    lifespan = SharedLifespan(recorded)
    failed: list[str] = []
    joined: list[str] = []

    async def first() -> None:
        with pytest.raises(RuntimeError) as caught:
            async with lifespan("s"):
                pass
        failed.append(str(caught.value))

    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.wait_all_tasks_blocked()
            leave = anyio.Event()
            tg.start_soon(held, lifespan, joined, leave)
            await anyio.wait_all_tasks_blocked()
            recorded.set_up_gate.set()
            await anyio.wait_all_tasks_blocked()
            assert failed == ["s-1 failed"] and joined == ["s-2"]
            leave.set()
    assert recorded.log == ["set up s-1", "set up s-2", "tearing down s-2", "torn down s-2"]


async def test_an_entry_made_during_the_teardown_gets_a_fresh_set_up_after_it() -> None:
    recorded = Recorded()
    recorded.teardown_gate = anyio.Event()
    lifespan = SharedLifespan(recorded)
    got: list[str] = []
    first_leaves, second_leaves = anyio.Event(), anyio.Event()
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(held, lifespan, got, first_leaves)
            await anyio.wait_all_tasks_blocked()
            first_leaves.set()
            await anyio.wait_all_tasks_blocked()  # s-1 is being torn down
            tg.start_soon(held, lifespan, got, second_leaves)
            await anyio.wait_all_tasks_blocked()
            assert got == ["s-1"] and recorded.set_ups == 1  # not joined to what is being torn down
            recorded.teardown_gate.set()
            await anyio.wait_all_tasks_blocked()
            assert got == ["s-1", "s-2"]
            second_leaves.set()
    assert recorded.log == [
        "set up s-1",
        "tearing down s-1",
        "torn down s-1",
        "set up s-2",
        "tearing down s-2",
        "torn down s-2",
    ]


async def test_a_cancelled_first_exit_tears_down_only_once_the_others_have_left() -> None:
    recorded = Recorded()
    lifespan = SharedLifespan(recorded)
    got: list[str] = []
    second_leaves = anyio.Event()
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            first = anyio.CancelScope()

            async def cancelled_first() -> None:
                with first:
                    await held(lifespan, got, anyio.Event())  # never told to leave: cancelled instead

            tg.start_soon(cancelled_first)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(held, lifespan, got, second_leaves)
            await anyio.wait_all_tasks_blocked()
            first.cancel()
            await anyio.wait_all_tasks_blocked()
            assert recorded.log == ["set up s-1"]  # still up for the second entry
            second_leaves.set()
    assert got == ["s-1", "s-1"]
    # torn down once the second left, in the first's cancelled task (as it would be with no other entry)
    assert recorded.log[:2] == ["set up s-1", "tearing down s-1"]
