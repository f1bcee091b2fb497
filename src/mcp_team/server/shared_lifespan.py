"""One set-up of a server for all the connections it serves at once: `SharedLifespan` wraps a server's lifespan.

The SDK enters a server's lifespan once per connection it runs in this process: every in-memory
`Client(server)` (in either mode) enters it again, on the same server object, and a script may well connect
several at once (the streamable-HTTP manager enters it once for all its sessions; stdio serves one). The SDK
has nothing to share one entry among them. Yet what the lifespan sets up (the run service, the team's tools
and MCP servers, the team-file watcher, the task group parked sampling rounds live in) is one per server
object: entered a second time it was replaced, so the first entry's exit waited forever on a run service
nothing would stop, and the first client's runs were gone once the second left.

So the entries made while a set-up is in force share it: the first sets it up, the others wait until it is
up and get the same state, and it is torn down once the last has left. Its task group lives in the first
entry's task (structured concurrency gives it no other home), so the first entry's exit waits until the
others have left, even when cancelled: tearing down under a connected client would fail its calls. That
wait lasts as long as the other clients stay connected, no longer; the other entries' exits never wait.
An entry made after the teardown started gets a set-up of its own, as every connection made one after
another does. A set-up that fails fails the first entry; the ones waiting for it each try their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

import anyio

ServerT = TypeVar("ServerT")
StateT = TypeVar("StateT")


@dataclass(eq=False)
class _SetUp(Generic[StateT]):
    """One entry of the wrapped lifespan, and the entries that share it."""

    entries: int = 1  # the first entry's, and one for each entry that joined and has not left
    up: bool = False
    state: StateT | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)  # set up, or failed to
    left: anyio.Event = field(default_factory=anyio.Event)  # no entry is in any longer: nothing may join
    closed: anyio.Event = field(default_factory=anyio.Event)  # torn down


class SharedLifespan(Generic[ServerT, StateT]):
    """`lifespan`, entered once for all the entries made while one is in force (see the module's docstring)."""

    def __init__(self, lifespan: Callable[[ServerT], AbstractAsyncContextManager[StateT]]) -> None:
        self._lifespan = lifespan
        self._current: _SetUp[StateT] | None = None

    @asynccontextmanager
    async def __call__(self, server: ServerT) -> AsyncIterator[StateT]:
        joined = await self._join()
        if joined is None:
            async with self._set_up(server) as state:
                yield state
            return
        try:
            yield cast(StateT, joined.state)  # set once up (a StateT may be None itself)
        finally:
            self._leave(joined)

    async def _join(self) -> _SetUp[StateT] | None:
        """The set-up in force, once up, with this entry counted in; None when this entry is to set one up."""
        while (setup := self._current) is not None:
            if setup.left.is_set():  # being torn down: the next set-up is a fresh one
                await setup.closed.wait()
                continue
            setup.entries += 1
            try:
                await setup.ready.wait()
            except BaseException:
                self._leave(setup)
                raise
            if setup.up:
                return setup
            self._leave(setup)  # its set-up failed: try one of this entry's own
        return None

    @asynccontextmanager
    async def _set_up(self, server: ServerT) -> AsyncIterator[StateT]:
        setup = self._current = _SetUp[StateT]()
        try:
            async with self._lifespan(server) as state:
                setup.state, setup.up = state, True
                setup.ready.set()
                try:
                    yield state
                finally:
                    self._leave(setup)
                    with anyio.CancelScope(shield=True):  # never tear down under another entry
                        await setup.left.wait()
        finally:
            setup.left.set()  # a set-up that failed: nobody joins it either
            if self._current is setup:
                self._current = None
            setup.ready.set()
            setup.closed.set()

    def _leave(self, setup: _SetUp[StateT]) -> None:
        setup.entries -= 1
        if setup.entries == 0:
            setup.left.set()
