"""Issue 11: a test per defect, each through a real client (`mcp-team serve` over stdio or HTTP, or the
`mcp-team` command), on both protocol revisions where the revision matters. Defects checked the same way
(a refused request, a bad stdio line) are subtests of one test sharing one server (pytest's `subtests`): a server
costs seconds of CPU to start, a case a few milliseconds.

A defect not fixed yet is a strict xfail whose reason names the root cause and where the fix goes, so the
test turns the suite red the moment it passes (remove the marker then). Tests without a marker guard a
defect fixed on this branch.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry import trace

from support import (
    HANG_GUARD,
    INITIALIZED,
    MCP_TEAM,
    clean_env,
    cli_here,
    free_port,
    initialize,
    run_cli,
    serve_http,
    stdio_lines,
)

pytestmark = [pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

REVISIONS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
REQUEST = "Research bees, calculate 2+2 and write a report, then review it"
ECHO_SERVER = Path(__file__).parents[1] / "fixtures" / "echo_mcp_server.py"


def xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


@asynccontextmanager
async def serve(mode: str, *args: str, model: str | None = "offline", **kw: Any) -> AsyncIterator[tuple[Client, Path]]:
    """`mcp-team serve [args]` over stdio, as Claude Desktop starts it; yields the client and its stderr file."""
    env = clean_env(**({"MCP_TEAM_MODEL": model} if model else {}), **kw.pop("env", {}))
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog:
        params = StdioServerParameters(command=MCP_TEAM, args=["serve", *args], env=env)
        async with Client(stdio_client(params, errlog=cast(TextIO, errlog)), mode=mode, **kw) as client:
            yield client, Path(errlog.name)


def run_json(*args: str) -> dict[str, Any]:
    """`mcp-team run --json --ephemeral` in this process (`support.cli_here`): these runs are about what the
    engine does, not about durability or the process (`run_cli` keeps the command's real processes)."""
    proc = cli_here("run", "--json", "--ephemeral", *args, MCP_TEAM_MODEL="offline")
    assert proc.stdout, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def raw_stdio(cases: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Over one `mcp-team serve`'s stdio: the handshake, then each case's line followed by a ping of its own,
    the next case only once that ping is answered; for each case, its answers, its ping's last. A ping's
    answer proves the server read the line before it and went on. (Lines are not sent all at once: the
    server answers a line it cannot parse at once, ahead of an earlier ping still being dispatched.)"""
    by_case: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryFile() as err, subprocess.Popen(
        [MCP_TEAM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
        env=clean_env(MCP_TEAM_MODEL="offline"),
    ) as proc:  # fmt: skip
        assert proc.stdin and proc.stdout
        guard = threading.Timer(HANG_GUARD, proc.kill)  # a hang ends the output, which fails the case
        guard.start()
        try:
            proc.stdin.write(stdio_lines(initialize(), INITIALIZED))
            for n, (name, line) in enumerate(cases.items()):
                ping = {"jsonrpc": "2.0", "id": 1000 + n, "method": "ping"}
                proc.stdin.write(line + "\n" + stdio_lines(ping))
                proc.stdin.flush()
                got = by_case[name] = []
                for out in filter(str.strip, proc.stdout):
                    answer = json.loads(out)
                    if answer.get("id") != 1:  # the handshake's
                        got.append(answer)
                    if answer.get("id") == ping["id"]:
                        break
            proc.stdin.close()
            proc.wait(timeout=HANG_GUARD)  # a server that stays after its stdin closed fails here, not at exit
        finally:
            guard.cancel()
    return by_case


async def mcp_error(call: Awaitable[Any]) -> MCPError:
    """The MCPError `call` raises. Asserting outside `serve` keeps a failure out of the client's task group."""
    try:
        await call
    except MCPError as exc:
        return exc
    return MCPError(0, "no error: the call succeeded")


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def runs(client: Client) -> list[dict[str, Any]]:
    contents = (await client.read_resource("team://runs")).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    found: list[dict[str, Any]] = json.loads(contents.text)["runs"]
    return found


# --- first list -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_logging_capability_and_no_log_below_the_level_asked_for_on_2025() -> None:
    """Fixed here: server/surface/log_level.py handles logging/setLevel, which also declares the capability.
    One server: the level is the session's, so setting it again on the same session is what a client does."""
    logs: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.level)

    fault = ("--fault", "server_error:researcher")  # every run's researcher fails: a warning each run
    async with serve("legacy", *fault, logging_callback=on_log) as (client, _):
        capability = client.server_capabilities.logging
        set_level = await client.set_logging_level("error")  # was -32601
        await client.call_tool("run_team", {"request": REQUEST})
        at_error = list(logs)
        await client.set_logging_level("info")
        await client.call_tool("run_team", {"request": REQUEST})
    assert capability is not None
    assert isinstance(set_level, types.EmptyResult)
    assert "warning" not in at_error, at_error
    assert "warning" in logs  # the failed handoff is logged to a client that asked for it


@pytest.mark.anyio
async def test_no_log_below_the_level_asked_for_on_2026() -> None:
    """2026-07-28: the per-request opt-in (`io.modelcontextprotocol/logLevel` in a request's `_meta`) is
    honoured by the SDK; one server, each call opting in (or not) on its own."""
    logs: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.level)

    fault = ("--fault", "server_error:researcher")  # every run's researcher fails: a warning each run
    seen: dict[str | None, list[str]] = {}
    async with serve("auto", *fault, logging_callback=on_log) as (client, _):
        for level in (None, "error", "warning"):  # no opt-in: no log at all
            logs.clear()
            meta = cast(types.RequestParamsMeta, {types.LOG_LEVEL_META_KEY: level}) if level else None
            await client.call_tool("run_team", {"request": REQUEST}, meta=meta)
            seen[level] = list(logs)
    assert seen[None] == [], seen
    assert seen["error"] == [], seen
    assert "warning" in seen["warning"], seen


@REVISIONS
@pytest.mark.anyio
async def test_bad_requests_are_refused_naming_what_is_wrong(mode: str, subtests: pytest.Subtests) -> None:
    """Requests the server refuses, each a case on one `mcp-team serve` (a refusal changes nothing, so the
    cases share it; the last case checks that). Fixed here, by case:
    - unknown prompt: server/surface/strict.py checks prompts/get before the SDK's handler (which raised ValueError);
    - 1 MB request: server/surface/limits.py ServerLimits (MCP_TEAM_MAX_REQUEST_CHARS), checked by the tools;
    - unknown tool arguments: server/surface/strict.py compares the arguments with the tool's input schema (the SDK
      dropped unknown ones), and the schemas say additionalProperties: false;
    - budgets: server/surface/limits.py client_budgets caps each override at the team's budget; the deadline is
      declared allow_inf_nan=False;
    - unknown resource: server/surface/strict.py answers -32002 on 2025-11-25 (the SDK said -32602 on every revision).
    """
    async with serve(mode) as (client, errlog):
        with subtests.test("1 MB request"):  # first: no run exists yet, so none may exist after it
            result = await client.call_tool("run_team", {"request": "Research bees. " + "x" * 1_000_000})
            assert result.is_error and "limit" in text_of(result)
            assert await runs(client) == []  # refused before the run started: nothing was spent
        with subtests.test("1 MB context"):
            result = await client.call_tool("researcher", {"task": "Summarize", "context": "y" * 1_000_000})
            assert result.is_error and "limit" in text_of(result)
        with subtests.test("unknown prompt"):
            error = await mcp_error(client.get_prompt("nope", {}))
            assert error.code == types.INVALID_PARAMS
            assert "nope" in error.message and "supervisor" in error.message  # what exists
        with subtests.test("missing prompt argument"):
            error = await mcp_error(client.get_prompt("researcher", {}))
            assert error.code == types.INVALID_PARAMS and "task" in error.message
        with subtests.test("unknown tool arguments"):
            result = await client.call_tool("run_team", {"request": "Research bees", "max_handofs": 3})
            schemas = [t.input_schema for t in (await client.list_tools()).tools]
            assert result.is_error
            assert "max_handofs" in text_of(result) and "max_handoffs" in text_of(result)
            assert schemas and all(s["additionalProperties"] is False for s in schemas)
        overrides: dict[str, Any] = {"max_tokens": 2**70, "max_handoffs": 10**12, "deadline_seconds": "inf",
                                     "max_model_calls": 10**9}  # fmt: skip
        for name, value in overrides.items():
            with subtests.test(f"lifting {name}"):  # a client cannot lift the operator's budgets
                result = await client.call_tool("run_team", {"request": "Research bees", name: value})
                assert result.is_error and name in text_of(result)
        with subtests.test("unknown tool"):
            error = await mcp_error(client.call_tool("nope", {}))
            assert error.code == types.INVALID_PARAMS
            assert "nope" in error.message and "run_team" in error.message
        with subtests.test("unknown resource"):  # its code follows the revision
            code = -32002 if mode == "legacy" else types.INVALID_PARAMS
            error = await mcp_error(client.read_resource("team://runs/nope"))
            unmatched = await mcp_error(client.read_resource("team://nope"))
            assert error.code == code and "nope" in error.message
            assert unmatched.code == code and "team://specialists" in unmatched.message  # lists what exists
        with subtests.test("nothing started"):  # the refusals above shared the server because none changes it
            assert await runs(client) == []
        log = errlog.read_text()
    assert "Traceback" not in log


@REVISIONS
@pytest.mark.anyio
async def test_progress_never_goes_backwards_nor_reaches_done_early(mode: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with serve(mode) as (client, _):
        await client.call_tool("run_team", {"request": REQUEST}, progress_callback=on_progress)
    ratios = [p / t for p, t in seen if t]
    assert len(seen) > 3
    assert [p for p, _ in seen] == sorted({p for p, _ in seen}), seen  # strictly increasing
    assert ratios == sorted(ratios), seen
    assert all(r < 1 for r in ratios[:-1]), seen


def test_http_messages_over_the_limit_get_413() -> None:
    """413 above MCP_TEAM_MAX_MESSAGE_BYTES, with a JSON-RPC error naming the limit (server/transports/messages.py)."""
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_MAX_MESSAGE_BYTES="65536")
    with serve_http(env=env) as base:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        big = {**initialize(), "params": {**initialize()["params"], "pad": "x" * 70_000}}
        refused = httpx2.post(f"{base}/mcp", json=big, headers=headers, timeout=HANG_GUARD)
        assert refused.status_code == 413 and "the limit is 65536" in refused.json()["error"]["message"]
        assert httpx2.post(f"{base}/mcp", json=initialize(), headers=headers, timeout=HANG_GUARD).status_code == 200


async def _sampling_answer(context: Any, params: types.CreateMessageRequestParams) -> Any:
    SEEN_SAMPLING.append(params)
    text = types.TextContent(type="text", text="Bees pollinate.")
    if params.tools:
        return types.CreateMessageResultWithTools(role="assistant", model="client-model", content=[text])
    return types.CreateMessageResult(role="assistant", model="client-model", content=text)


SEEN_SAMPLING: list[types.CreateMessageRequestParams] = []


@REVISIONS
@pytest.mark.anyio
async def test_no_tool_choice_for_a_specialist_without_tools(mode: str) -> None:
    """Fixed here: SamplingModel.complete (server/client_features/sampling.py) forced ToolChoice(auto) when a
    call had no tools."""
    SEEN_SAMPLING.clear()
    capabilities = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with serve(mode, model=None, sampling_callback=_sampling_answer, sampling_capabilities=capabilities) as (
        client,
        _,
    ):
        # The writer: the built-in member without tools (the researcher has fetch_url).
        result = await client.call_tool("writer", {"task": "Why do bees matter?"})
    assert not result.is_error, text_of(result)
    assert SEEN_SAMPLING and all(p.tools is None and p.tool_choice is None for p in SEEN_SAMPLING)


# --- second list ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_client_may_lower_the_budgets() -> None:
    async with serve("legacy") as (client, _):
        result = await client.call_tool("run_team", {"request": REQUEST, "max_handoffs": 1})
    assert not result.is_error, text_of(result)
    started = [h for h in result.structured_content["handoffs"] if h["status"] != "refused"]
    assert len(started) == 1 and "handoff budget (1)" in result.structured_content["stopped_by"]


@pytest.mark.parametrize("mode", ["adaptive", "planned"])
@pytest.mark.parametrize("fault", ["rate_limit", "server_error", "overloaded", "timeout"])
def test_one_transient_supervisor_error_is_retried(mode: str, fault: str) -> None:
    # The offline timeout fault never returns: the call timeout cuts it (the deadline guards the test).
    extra = ["--deadline", "60", "--call-timeout", "2"] if fault == "timeout" else []
    result = run_json("--mode", mode, "--fault", f"{fault}:supervisor:1", *extra, REQUEST)
    assert result["status"] == "complete" and result["handoffs"], result["answer"]


def test_planned_mode_stays_within_the_token_budget_and_says_it_stopped() -> None:
    result = run_json("--mode", "planned", "--max-tokens", "500", REQUEST)
    total = result["usage"]["total"]
    assert total["input_tokens"] + total["output_tokens"] <= 500, total
    assert result["stopped_by"] and "token" in result["stopped_by"]


def test_the_reserved_closing_call_is_used() -> None:
    result = run_json("--max-model-calls", "2", REQUEST)
    assert result["usage"]["model_calls"] == 2, result["usage"]


BAD_LINES: dict[str, tuple[str, int | None, int]] = {
    "params-x": ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}', 5, -32602),
    "deep-nesting": ("[" * 100_000 + "]" * 100_000, None, -32700),
    "garbage": ("hello, server", None, -32700),
    "invalid-json": ('{"jsonrpc": "2.0", "id": 3, "method": ', None, -32700),
}


def test_stdio_answers_every_bad_line(subtests: pytest.Subtests) -> None:
    """Each bad line, then a line over the size limit, on one stdio session: each gets its answer, and the
    ping after each proves the server read it and went on. The size limit was fixed here: `mcp-team serve`
    serves stdio through the gate (server/transports/stdio.py serve_stdio)."""
    too_big = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"pad": "x" * 5_000_000}})
    answers = raw_stdio({**{name: line for name, (line, _, _) in BAD_LINES.items()}, "over-the-limit": too_big})
    for n, (name, (_, request_id, code)) in enumerate(BAD_LINES.items()):
        with subtests.test(name):
            got = answers[name]
            assert got and got[-1].get("id") == 1000 + n, got  # its ping's answer: the server went on
            assert [(a.get("id"), a.get("error", {}).get("code")) for a in got[:-1]] == [(request_id, code)], got
    with subtests.test("over-the-limit"):
        got = answers["over-the-limit"]
        error = got[0].get("error", {})
        assert error.get("code") == -32600 and "limit" in error.get("message", ""), got
        assert got[-1].get("id") == 1000 + len(BAD_LINES), got  # and the server went on


def _team_file(tmp: Path, secret: str, pin: str) -> Path:
    """A team whose external MCP server gets `secret` and `pin` in its env: values mcp-team must never show."""
    path = tmp / "team.toml"
    path.write_text(
        f"""
[[mcp_servers]]
name = "echo"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(ECHO_SERVER))}]
env = {{ ECHO_TOKEN = {json.dumps(secret)}, ECHO_PIN = {json.dumps(pin)} }}

[[specialists]]
name = "researcher"
description = "Finds facts."
prompt = "Find facts."
tools = ["echo/echo"]

[[specialists]]
name = "writer"
description = "Writes reports."
prompt = "Write."
"""
    )
    return path


@pytest.mark.anyio
async def test_secrets_long_and_short_are_redacted_and_the_operator_warned(
    tmp_path: Path, subtests: pytest.Subtests
) -> None:
    """Two cases on one server whose team file holds a secret and a short one (a pin). Fixed here:
    - server/transports/middleware.py redact_tool_results redacts every tool result (run_team returned the engine's
      RunResult unredacted; only the stored record was);
    - telemetry/content.py register_secret ignored secrets under 8 characters without a word."""
    secret, pin = "tok-9f8e7d6c5b4a3921", "k9x2q7"
    async with serve("legacy", "--team", str(_team_file(tmp_path, secret, pin))) as (client, errlog):
        result = await client.call_tool("run_team", {"request": f"Research the token {secret} and write it up"})
        record = (await client.read_resource(f"team://runs/{result.structured_content['run_id']}")).contents[0]
        own = await client.call_tool("researcher", {"task": f"Research the token {secret}"})
        pin_result = await client.call_tool("run_team", {"request": f"Research the code {pin} and write it up"})
        pin_run = f"team://runs/{pin_result.structured_content['run_id']}"
        pin_record = (await client.read_resource(pin_run)).contents[0]
        warnings = errlog.read_text()
    with subtests.test("run_team result"):
        assert isinstance(record, types.TextResourceContents) and secret not in record.text  # the record
        assert secret not in json.dumps(result.structured_content) and secret not in text_of(result)
        assert not own.is_error and "[redacted]" in text_of(own) and secret not in text_of(own)  # a tool's
    with subtests.test("short secret"):
        assert isinstance(pin_record, types.TextResourceContents) and pin not in pin_record.text
        assert "short" in warnings and pin not in warnings


def test_an_empty_http_token_is_refused_at_start_up() -> None:
    """Fixed here: server/transports/http.py HttpSettings accepted MCP_TEAM_HTTP_TOKEN="" (auth_for then required an
    empty bearer token, or none at all)."""
    env = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_HTTP_TOKEN": "  "}
    proc = run_cli("serve", "--http", "--port", str(free_port()), env=env)
    assert proc.returncode == 2
    assert "MCP_TEAM_HTTP_TOKEN" in proc.stderr and "empty" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("mode", ["adaptive", "planned"])
def test_a_reviewer_still_asking_for_revision_is_not_complete(mode: str) -> None:
    result = run_json("--mode", mode, "--fault", "revise:reviewer", REQUEST)
    assert result["status"] == "partial", result["status"]


@pytest.mark.parametrize("fault", ["unknown_specialist", "malformed_tool_call", "repeat_handoff"])
def test_supervisor_fault_kinds_drive_planned_mode(fault: str) -> None:
    result = run_json("--mode", "planned", "--fault", f"{fault}:supervisor:1", REQUEST)
    assert result["failures"], "the fault left no trace: the planner never saw it"
    # The plan went back for repair once, and the repaired plan ran.
    assert [(f["kind"], f["recovered"]) for f in result["failures"]] == [("invalid_plan", True)]
    assert result["status"] == "complete" and result["handoffs"]


def test_call_timeout_is_a_cli_option() -> None:
    timeout = ("--call-timeout", "1", "--fault", "timeout:researcher:1")
    proc = run_cli("run", "--model", "offline", "--json", "--ephemeral", *timeout, "Research bees")
    assert proc.returncode in (0, 3), proc.stderr
    assert any(f["kind"] == "timeout" for f in json.loads(proc.stdout)["failures"])


@pytest.mark.anyio
async def test_serve_takes_call_timeout_too() -> None:
    async with serve("legacy", "--call-timeout", "1", "--fault", "timeout:researcher:1") as (client, _):
        result = await client.call_tool("run_team", {"request": "Research bees"})
    assert not result.is_error, text_of(result)
    assert [f["kind"] for f in result.structured_content["failures"]] == ["timeout"]


@pytest.mark.anyio
async def test_served_runs_leave_records_and_trace_files_without_dangling_parents(
    tmp_path: Path, subtests: pytest.Subtests
) -> None:
    """One server with a trace directory, two runs: a specialist tool call leaves a run record and a trace
    file; a run_team run's trace file has no parentSpanId pointing to a span outside the file (fixed here)."""
    tracer = trace.get_tracer("tests")
    async with serve("legacy", "--trace-dir", str(tmp_path)) as (client, _):
        specialist = await client.call_tool("researcher", {"task": "Why do bees matter?"})
        found = await runs(client)  # before run_team: the specialist's run is the only one
        with tracer.start_as_current_span("client turn"):  # the SDK's client sends this span as traceparent
            team = await client.call_tool("run_team", {"request": "Research bees"})
    with subtests.test("specialist call"):
        assert not specialist.is_error
        assert len(found) == 1
        assert (tmp_path / f"{found[0]['run_id']}.json").exists()
    with subtests.test("no dangling parent"):
        doc = json.loads((tmp_path / f"{team.structured_content['run_id']}.json").read_text())
        spans = [span for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
        ids = {s["spanId"] for s in spans}
        dangling = [s["parentSpanId"] for s in spans if s.get("parentSpanId") and s["parentSpanId"] not in ids]
        assert spans and not dangling


@pytest.mark.anyio
async def test_a_2026_sampling_run_writes_its_trace_file(tmp_path: Path) -> None:
    """Fixed here: the TraceFileProcessor took the first round's tools/call span (stamped with
    the run id, ended before the run) for the root's parent inside the run, so the root never counted as ended."""
    capabilities = types.SamplingCapability(tools=types.SamplingToolsCapability())

    async def client_model(context: Any, params: types.CreateMessageRequestParams) -> Any:
        tools = {t.name for t in params.tools or []}
        if "finalize" in tools:
            call = types.ToolUseContent(type="tool_use", id="f1", name="finalize", input={"answer": "Bees matter."})
            return types.CreateMessageResultWithTools(
                role="assistant", model="client-model", content=[call], stop_reason="toolUse"
            )
        return types.CreateMessageResultWithTools(
            role="assistant", model="client-model", content=[types.TextContent(type="text", text="Facts.")]
        )

    async with serve(
        "auto", "--trace-dir", str(tmp_path), model=None, sampling_callback=client_model,
        sampling_capabilities=capabilities,
    ) as (client, _):  # fmt: skip
        result = await client.call_tool("run_team", {"request": "Why do bees matter?"})
    assert not result.is_error, text_of(result)
    assert (tmp_path / f"{result.structured_content['run_id']}.json").exists()


@pytest.mark.parametrize("fault", ["rate_limit:researcher:1", "revise:reviewer"])
def test_engine_notes_do_not_leak_into_the_answer(fault: str) -> None:
    answer = run_json("--fault", fault, REQUEST)["answer"]
    assert "(Retry:" not in answer and not re.search(r"revision\(s\) left", answer), answer


def test_run_flags_merge_over_the_team_files_budgets(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    assert run_cli("init", str(team)).returncode == 0
    team.write_text(team.read_text().replace("max_model_calls = 80", "max_model_calls = 3"))
    result = run_json("--team", str(team), "--max-handoffs", "5", REQUEST)
    assert result["usage"]["model_calls"] <= 3 and "model-call budget (3)" in (result["stopped_by"] or "")


# --- what to build ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_concurrent_runs_beyond_the_limit_are_told_to_retry_later() -> None:
    env = {"MCP_TEAM_MAX_RUNS": "1", "MCP_TEAM_OFFLINE_LATENCY_MS": "200"}
    outcomes: list[types.CallToolResult] = []
    async with serve("legacy", env=env) as (client, _):

        async def one() -> None:
            outcomes.append(await client.call_tool("run_team", {"request": "Research bees"}))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
    busy = [r for r in outcomes if r.is_error and "busy" in text_of(r)]
    assert len(busy) == 2 and sum(not r.is_error for r in outcomes) == 1


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match
    return int(match.group(1))


def test_a_burst_of_runs_stays_within_the_memory_of_the_run_limit() -> None:
    """Fixed here: at most MCP_TEAM_MAX_RUNS runs are in progress (server/surface/limits.py), the others are told the
    server is busy at once, so a burst no longer costs memory in proportion to its size (the same burst with
    no limit took the server from 74 MB to 166 MB); run records are kept compressed (server/store.py). RSS is
    a high-water mark CPython seldom gives back, so what this bounds is the peak."""
    calls = [
        {"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
         "params": {"name": "run_team", "arguments": {"request": f"Research bees {n} and write a report"}}}
        for n in range(1000)
    ]  # fmt: skip
    with subprocess.Popen(
        [MCP_TEAM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="20"),
    ) as proc:  # fmt: skip
        assert proc.stdin and proc.stdout
        proc.stdin.write(stdio_lines(initialize(), INITIALIZED, *calls[:10]))
        proc.stdin.flush()
        _read_answers(proc.stdout, 11)
        before = _rss_kb(proc.pid)
        proc.stdin.write(stdio_lines(*calls[10:]))
        proc.stdin.flush()
        answers = _read_answers(proc.stdout, len(calls) - 10)
        after = _rss_kb(proc.pid)
        proc.stdin.close()
    busy = sum("busy" in a and "MCP_TEAM_MAX_RUNS" in a for a in answers)
    assert 0 < busy < len(answers)  # the limit was reached, and runs went on within it
    assert after - before < 32 * 1024, f"RSS grew {after - before} kB over a burst of {len(answers)} runs"


def _read_answers(stdout: Any, count: int) -> list[str]:
    answers: list[str] = []
    for line in stdout:
        if '"id"' in line and ('"result"' in line or '"error"' in line):
            answers.append(line)
            if len(answers) == count:
                return answers
    raise AssertionError(f"the server stopped after {len(answers)} of {count} answers")
