"""A small engine with the shape of the real one, for testing runs/ until the engine seam lands.

A supervisor call, then K concurrent handoffs (each a branch: several model calls, a fan-out of tool
calls through `gather`, a timing-dependent `decide`), then a synthesis call. Every model and tool call
appends a line to a log file when it finishes, so a test can tell which calls ran again after a crash.
Each branch checks that every result it got is its own.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio

from mcp_team.handoffs import HandoffRecord, RunEvent, RunResult, UsageReport
from mcp_team.handoffs.runtime import Branch
from mcp_team.llm import Message, ModelRequest, ModelResponse, TextBlock
from mcp_team.runs.runtime import DurableModel, durable_tool
from mcp_team.specialists.tools import Tool

T = TypeVar("T")


class Ephemeral:
    """The in-memory runtime (what handoffs/runtime.py's default does)."""

    async def branches(self, work: Sequence[Branch]) -> None:
        async with anyio.create_task_group() as tg:
            for branch in work:
                tg.start_soon(branch.body)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        out: list[Any] = [None] * len(calls)

        async def one(i: int) -> None:
            out[i] = await calls[i]()

        async with anyio.create_task_group() as tg:
            for i in range(len(calls)):
                tg.start_soon(one, i)
        return out

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        return value()


@dataclass
class LoggingModel:
    engine: FakeEngine
    name: str = "fake"
    provider: str = "offline"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        text = str(request.messages[-1].content)
        if self.engine.latency:
            await anyio.sleep(self.engine.latency)  # read at each call: a test may make later calls hang
        self.engine.calls += 1
        _log(self.engine.log, text)
        return ModelResponse(content=[TextBlock(text=f"ans:{text}")], model=self.name)


def _log(path: str | None, what: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"call": what, "pid": os.getpid()}) + "\n")


@dataclass
class FakeEngine:
    k: int = 4
    steps: int = 3
    tools: int = 2
    latency: float = 0.0
    log: str | None = None
    team_hash: str = "fake-team-1"
    mismatches: list[str] = field(default_factory=list)
    calls: int = 0
    decide: bool = True

    async def run(
        self,
        run: Any,
        runtime: Any,
        on_event: Callable[[RunEvent], Awaitable[None]],
        on_finish: Callable[[RunResult], None],
        approve: Any = None,
    ) -> RunResult:
        runtime = runtime or Ephemeral()
        model = DurableModel(LoggingModel(self), "specialist")
        supervisor = DurableModel(LoggingModel(self), "supervisor")
        started = datetime.now(UTC)
        records: list[HandoffRecord] = []

        async def note(args: dict[str, Any]) -> str:
            await anyio.sleep(self.latency / 2)
            _log(self.log, f"tool {args['b']} {args['j']}")
            return f"tool:{args['b']}:{args['j']}"

        tool = durable_tool(Tool("note", "write a note", {"type": "object"}, note))

        def ask(text: str) -> ModelRequest:
            return ModelRequest(system="s", messages=[Message(role="user", content=text)])

        await supervisor.complete(ask(f"plan {run.request}"))

        async def handoff(seq: int) -> None:
            rec = HandoffRecord(id=f"h{seq + 1}", run_id=run.run_id, target="worker", call_id=f"c{seq}",
                                seq=seq + 1, task=f"task {seq}", started_at=datetime.now(UTC))  # fmt: skip
            records.append(rec)
            await on_event(RunEvent("handoff_started", f"h{seq + 1}", rec))
            outputs = []
            for i in range(self.steps):
                got = (await model.complete(ask(f"b{seq} s{i}"))).text
                if got != f"ans:b{seq} s{i}":
                    self.mismatches.append(f"branch {seq} step {i} got {got}")
                outputs.append(got)
            calls = [(lambda j=j: tool.run({"b": seq, "j": j})) for j in range(self.tools)]
            results = await runtime.gather(calls) if calls else []
            for j, got in enumerate(results):
                if got != f"tool:{seq}:{j}":
                    self.mismatches.append(f"branch {seq} tool {j} got {got}")
            done = lambda: sum(r.status == "completed" for r in records)  # noqa: E731
            first = await runtime.decide("finished_first", done) if self.decide else 0
            rec.status, rec.ended_at = "completed", datetime.now(UTC)
            rec.output = " | ".join([*outputs, *results, f"after {first}"])
            await on_event(RunEvent("handoff_finished", f"h{seq + 1}", rec))

        try:
            await runtime.branches([Branch(f"{run.run_id}/h{seq + 1}", functools.partial(handoff, seq))
                                    for seq in range(self.k)])  # fmt: skip
        except anyio.get_cancelled_exc_class():
            on_finish(self._result(run, records, started, "cancelled", ""))
            raise
        answer = (await supervisor.complete(ask("synthesize"))).text
        status = "failed" if self.mismatches else "complete"
        return self._result(run, records, started, status, answer + "; ".join(self.mismatches))

    def _result(self, run: Any, records: list[HandoffRecord], started: datetime, status: Any, answer: str) -> RunResult:
        for r in records:
            if r.status == "running":
                r.status = "cancelled"
        return RunResult(answer=answer, status=status, handoffs=sorted(records, key=lambda r: int(r.id[1:])),
                         failures=[], usage=UsageReport(), run_id=run.run_id, trace_id=None, request=run.request,
                         mode="adaptive", started_at=started, ended_at=datetime.now(UTC))  # fmt: skip
