"""Fuzzing the MCP surface (issue 11): random and adversarial arguments for every tool and prompt, through an
in-process MCP client on both revisions. Whatever arrives, the server answers with a result or a clear error
(never an internal error, a bare "Error executing tool", or a traceback) and keeps serving.

One client per revision lives across all examples (on an event loop of the test's thread that runs only during a
call, `Served`), so an example that broke the server would fail the next one's ping. Not on a loop in a thread
of its own (a blocking portal): the server's work that goes on after an answer (a span starting draws its id from
the global `random`, as OpenTelemetry's id generator does) then ran while Hypothesis drew the next example's
arguments, and Hypothesis warned that a strategy used `random` (HypothesisDeprecationWarning), now and then.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server

pytestmark = [pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.slow]

EXAMPLES = 40  # per test and revision: the whole file runs in well under a minute
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
TOOLS = {
    "run_team": ["request", "mode", "max_handoffs", "max_model_calls", "max_tokens", "deadline_seconds"],
    "plan_team": ["request"],
    **{name: ["task", "context"] for name in ("researcher", "analyst", "writer", "coder", "reviewer")},
}
PROMPTS = {"supervisor": ["request"], **{n: ["task", "context"] for n in ("researcher", "analyst", "writer")}}
# Errors a client made, answered as such; anything else (-32603 above all) is the server's fault.
CLIENT_ERRORS = {types.INVALID_PARAMS, types.INVALID_REQUEST}

# Text a JSON-RPC message can carry: any code point but lone surrogates (JSON text cannot encode them).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
adversarial_text = st.one_of(
    text,
    st.sampled_from(["", " ", "\x00", "\n" * 50, "🐝" * 500, "‮RTL", "{{request}}", "'; DROP TABLE runs;--"]),
    st.integers(10_000, 120_000).map(lambda n: "x" * n),  # huge, yet under the message limit
)
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**12]),
    st.floats(allow_nan=False, allow_infinity=False),
)
leaves = st.one_of(st.none(), st.booleans(), numbers, adversarial_text)
nested = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3))
deep = st.integers(20, 60).map(lambda depth: _nest(depth))
values = st.one_of(leaves, nested, deep, st.sampled_from(["inf", "-inf", "nan", "1e999", "adaptive", "planned"]))


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"a": [value]}
    return value


@st.composite
def tool_calls(draw: st.DrawFn, *, extra: bool) -> tuple[str, dict[str, Any]]:
    """A tool and arguments: each known parameter missing, right or wrong; with `extra`, unknown ones too."""
    name = draw(st.sampled_from(sorted(TOOLS)))
    arguments: dict[str, Any] = {}
    for param in TOOLS[name]:
        choice = draw(st.sampled_from(["omit", "plausible", "wild"]))
        if choice == "plausible":
            arguments[param] = draw(adversarial_text if param in ("request", "task", "context") else numbers)
        elif choice == "wild":
            arguments[param] = draw(values)
    if extra:
        unknown = draw(st.dictionaries(text.filter(lambda k: k not in TOOLS[name]), values, min_size=1, max_size=3))
        arguments.update(unknown)
    return name, arguments


@st.composite
def prompt_gets(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    name = draw(st.sampled_from([*sorted(PROMPTS), "nope", ""]))
    params = PROMPTS.get(name, ["task"])
    keys = draw(st.lists(st.sampled_from([*params, "unknown"]), unique=True, max_size=len(params) + 1))
    return name, {k: draw(adversarial_text) for k in keys}


P = ParamSpec("P")
T = TypeVar("T")


class Served:
    """An event loop in the test's thread, run only during `call`: what the server does in the background waits
    for the next call, never running while Hypothesis draws. `hold` keeps an async context open in one task
    across calls (its task groups must end in the task that began them)."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.background: list[asyncio.Task[None]] = []

    def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        async def run() -> T:
            return await fn(*args, **kwargs)

        return self.runner.run(run())

    def start(self, work: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            await work()

        self.background.append(self.runner.get_loop().create_task(run()))

    def close(self) -> None:
        for task in self.background:
            task.cancel()
        self.runner.close()  # cancels what is left, and waits for it


@pytest.fixture(scope="module", params=["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def served_client(request: pytest.FixtureRequest) -> Iterator[tuple[Served, Client]]:
    server = build_server(ModelSettings(model="offline"))  # type: ignore[call-arg]
    served = Served()
    entered: asyncio.Future[Client] = served.runner.get_loop().create_future()
    leave = asyncio.Event()

    async def hold() -> None:
        async with Client(server, mode=request.param) as client:
            entered.set_result(client)
            await leave.wait()

    served.start(hold)
    try:
        client = served.call(lambda: entered)
        yield served, client
        served.call(_set, leave)
    finally:
        served.close()


async def _set(event: asyncio.Event) -> None:
    event.set()


def _check_tool(served: Served, client: Client, name: str, args: dict[str, Any]) -> None:
    try:
        result = served.call(client.call_tool, name, args)
    except MCPError as exc:
        assert exc.code in CLIENT_ERRORS, f"{name}({args!r:.300}) -> {exc.code} {exc.message}"
        assert "Traceback" not in exc.message
    else:
        if result.is_error:
            message = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            # The SDK's text for an exception the tool did not expect: no reason, the traceback in the log.
            assert message.strip() != f"Error executing tool {name}", f"internal error for {name}({args!r:.300})"
            assert "Traceback" not in message
            # invalid arguments are named one by one, not with pydantic's whole report and its links
            assert "errors.pydantic.dev" not in message and "Arguments\n" not in message, message
    assert served.call(client.list_tools).tools  # still serving (ping is gone on 2026-07-28)


@FUZZ
@given(call=tool_calls(extra=False))
def test_tools_answer_any_arguments_clearly(
    served_client: tuple[Served, Client], call: tuple[str, dict[str, Any]]
) -> None:
    _check_tool(*served_client, *call)


def test_invalid_arguments_are_named_one_by_one(served_client: tuple[Served, Client]) -> None:
    served, client = served_client
    result = served.call(client.call_tool, "run_team", {"mode": "sideways", "max_handoffs": "many"})
    message = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
    assert result.is_error and message.startswith("Error executing tool run_team: invalid argument(s): "), message
    for problem in ("request: Field required", "mode: Input should be 'adaptive' or 'planned'", "max_handoffs: "):
        assert problem in message, message


@FUZZ
@given(call=tool_calls(extra=True))
def test_tools_refuse_unknown_arguments(served_client: tuple[Served, Client], call: tuple[str, dict[str, Any]]) -> None:
    served, client = served_client
    name, args = call
    try:
        result = served.call(client.call_tool, name, args)
    except MCPError as exc:
        assert exc.code in CLIENT_ERRORS
        return
    unknown = sorted(set(args) - set(TOOLS[name]))
    message = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
    assert result.is_error and all(k in message for k in unknown), f"{name}: {unknown} accepted"


@FUZZ
@given(get=prompt_gets())
def test_prompts_answer_any_arguments_clearly(
    served_client: tuple[Served, Client], get: tuple[str, dict[str, str]]
) -> None:
    served, client = served_client
    name, args = get
    try:
        result = served.call(client.get_prompt, name, args)
    except MCPError as exc:
        assert exc.code in CLIENT_ERRORS, f"prompts/get {name!r} {sorted(args)} -> {exc.code} {exc.message}"
        assert "Traceback" not in exc.message
    else:
        assert result.messages
    assert served.call(client.list_tools).tools


@pytest.fixture(scope="module")
def busy_server() -> Iterator[Served]:
    """A loop whose background work keeps drawing from the global `random`, as a server's new spans do."""
    served = Served()

    async def draw_ids() -> None:
        while True:
            random.getrandbits(64)
            await asyncio.sleep(0)

    served.start(draw_ids)
    yield served
    served.close()


@pytest.mark.filterwarnings("error::hypothesis.errors.HypothesisDeprecationWarning")
@settings(max_examples=20)
@given(call=tool_calls(extra=True))
def test_the_servers_background_work_never_runs_while_hypothesis_draws(
    busy_server: Served, call: tuple[str, dict[str, Any]]
) -> None:
    # The background work runs here, in the test's own thread, and only here: had it run meanwhile, drawing `call`
    # would have raised the warning (an error here).
    busy_server.call(asyncio.sleep, 0.001)
