"""Traces as operators see them: OTLP export from a stdio server, trace-context join, redaction, files."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from opentelemetry import trace

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.telemetry import attributes as A
from mcp_team.telemetry import content
from mcp_team.telemetry.tracefile import file_spans, load_trace_file
from support import HANG_GUARD, INITIALIZED, MCP_TEAM, clean_env, cli_here, initialize, stdio_lines
from support.otlp_receiver import OTLPReceiver

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

SECRET = "sk-ant-api03-SECRETSECRETSECRET-0123456789"


def by_id(spans: list[dict]) -> dict[str, dict]:
    return {s["span_id"]: s for s in spans}


async def test_stdio_server_exports_every_span_before_the_client_closes_it() -> None:
    with OTLPReceiver() as receiver:
        env = clean_env(
            MCP_TEAM_MODEL="offline", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_SERVICE_NAME="team-under-test"
        )
        async with Client(StdioServerParameters(command=MCP_TEAM, args=["serve"], env=env), mode="legacy") as client:
            result = await client.call_tool("run_team", {"request": "Research bees and calculate 2+2"})
        run = result.structured_content
        spans = receiver.wait_for(lambda s: any(x["name"] == "invoke_agent analyst" for x in s))

    ours = [s for s in spans if s["attributes"].get(A.CONVERSATION_ID) == run["run_id"]]
    assert {s["trace_id"] for s in ours} == {run["trace_id"]}
    index = by_id(spans)
    root = next(s for s in ours if s["name"] == "invoke_agent supervisor")
    assert index[root["parent_span_id"]]["name"] == "tools/call run_team"  # under the SDK's server span
    transfer = next(s for s in ours if s["name"] == "execute_tool transfer_to_analyst")
    assert transfer["parent_span_id"] == root["span_id"]
    assert transfer["attributes"][A.TRANSFER_TARGET_NAME] == "analyst"
    analyst = next(s for s in ours if s["name"] == "invoke_agent analyst")
    assert analyst["parent_span_id"] == transfer["span_id"]
    tool = next(s for s in ours if s["name"] == "execute_tool calculate")
    assert tool["parent_span_id"] == analyst["span_id"]
    chats = [s for s in ours if s["name"] == "chat offline"]
    assert all(s["kind"] == "client" and s["attributes"][A.USAGE_INPUT_TOKENS] > 0 for s in chats)
    assert root["attributes"][A.USAGE_INPUT_TOKENS] == run["usage"]["total"]["input_tokens"]
    assert root["resource"]["service.name"] == "team-under-test"
    assert A.INPUT_MESSAGES not in chats[0]["attributes"]  # content capture is off by default


def test_sigterm_mid_run_cancels_cleanly_and_exports_what_ran() -> None:
    with OTLPReceiver() as receiver:
        env = clean_env(
            MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="300", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint
        )
        proc = subprocess.Popen(
            [MCP_TEAM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert proc.stdin is not None and proc.stdout is not None
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "run_team",
                "arguments": {"request": "Research bees and calculate 2+2"},
                "_meta": {"progressToken": "p1"},
            },
        }
        proc.stdin.write(stdio_lines(initialize(), INITIALIZED, call).encode())
        proc.stdin.flush()
        assert b'"serverInfo"' in proc.stdout.readline()
        started = 0
        while started < 2:  # progress: both handoffs started, so both specialists are inside 300 ms model calls
            message = json.loads(proc.stdout.readline())
            started += message.get("method") == "notifications/progress"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 0  # exits by itself, and cleanly
        spans = receiver.wait_for(lambda s: any(x["name"] == "invoke_agent supervisor" for x in s))

    names = [s["name"] for s in spans]
    assert "chat offline" in names and "invoke_agent researcher" in names
    researcher = next(s for s in spans if s["name"] == "invoke_agent researcher")
    assert researcher["attributes"][A.ERROR_TYPE] == "cancelled" and researcher["status"] == "ERROR"
    supervisor = next(s for s in spans if s["name"] == "invoke_agent supervisor")
    assert supervisor["attributes"][A.ERROR_TYPE] == "cancelled"


async def test_run_joins_the_clients_trace(spans) -> None:
    tracer = trace.get_tracer("test-client")
    async with Client(build_server(ModelSettings(model="offline")), mode="legacy") as client:
        with tracer.start_as_current_span("client turn") as turn:
            result = await client.call_tool("run_team", {"request": "Research bees"})

    trace_id = format(turn.get_span_context().trace_id, "032x")
    assert result.structured_content["trace_id"] == trace_id
    root = spans.one("invoke_agent supervisor")
    server_span = spans.parent(root)
    assert server_span is not None and server_span.name == "tools/call run_team"
    client_span = spans.parent(server_span)
    assert client_span is not None and client_span.name == "MCP send tools/call run_team"
    assert spans.parent(client_span).name == "client turn"
    assert spans.attr(server_span, A.CONVERSATION_ID) == result.structured_content["run_id"]
    run_spans = [s for s in spans.all if spans.attr(s, A.CONVERSATION_ID) == result.structured_content["run_id"]]
    assert len(run_spans) >= 5 and all(format(s.context.trace_id, "032x") == trace_id for s in run_spans)


@pytest.fixture
def capture_on():
    content.set_capture_enabled(True)
    yield
    content.set_capture_enabled(None)


async def test_secrets_never_reach_spans_or_records_even_with_content_capture(
    spans, capture_on, caplog: pytest.LogCaptureFixture
) -> None:
    content.register_secret(SECRET)
    request = f"Research bees. My key is {SECRET} and my header is Authorization: Bearer tok_abcdefghijklmnop"
    async with Client(build_server(ModelSettings(model="offline")), mode="legacy") as client:
        result = await client.call_tool("run_team", {"request": request})
        record = (await client.read_resource(f"team://runs/{result.structured_content['run_id']}")).contents[0].text

    chat = spans.named("chat offline")[0]
    messages = json.loads(str(spans.attr(chat, A.INPUT_MESSAGES)))
    assert messages[0]["role"] == "user" and "Research bees" in messages[0]["parts"][0]["content"]
    transfer = spans.one("execute_tool transfer_to_researcher")
    assert "Research" in json.loads(str(spans.attr(transfer, A.TOOL_CALL_ARGUMENTS)))["task"]
    everything = json.dumps([dict(s.attributes or {}) for s in spans.all]) + record + caplog.text
    assert "Research bees" in everything  # content was captured...
    assert SECRET not in everything and "tok_abcdefghijklmnop" not in everything  # ...without the secrets
    assert "[redacted]" in record


def test_run_writes_an_otlp_json_trace_file_and_trace_shows_it(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    proc = subprocess.run(
        [
            MCP_TEAM,
            "run",
            "--ephemeral",
            "--model",
            "offline",
            "--json",
            "--quiet",
            "--trace-dir",
            str(tmp_path / "traces"),
            "--jaeger-json",
            str(target),
            "Research bees and calculate 2+2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    spans = file_spans(load_trace_file(target))
    assert {s.trace_id for s in spans} == {json.loads(proc.stdout)["trace_id"]}
    names = {s.name for s in spans}
    assert {"invoke_agent supervisor", "execute_tool transfer_to_analyst", "execute_tool calculate"} <= names

    shown = subprocess.run(
        [MCP_TEAM, "trace", run_id, "--dir", str(tmp_path / "traces")],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert shown.returncode == 0, shown.stderr
    assert f"run {run_id}" in shown.stdout and "→ analyst" in shown.stdout and "tool calculate" in shown.stdout

    # What `trace` says of files it cannot show: the same command, in this process.
    missing = cli_here("trace", "nope", "--dir", str(tmp_path / "traces"))
    assert missing.returncode == 1 and "no trace for run 'nope'" in missing.stderr and run_id in missing.stderr
    nowhere = cli_here("trace", "nope", "--dir", str(tmp_path / "nowhere"))
    assert nowhere.returncode == 1 and "(no such directory)" in nowhere.stderr, nowhere.stderr

    # A Jaeger v1 JSON file of an older mcp-team is named as such, with what to do.
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"data": [{"traceID": "0" * 32, "spans": [], "processes": {}}]}))
    refused = cli_here("trace", str(old))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "Jaeger v1 JSON file, written by an older mcp-team" in refused.stderr and "--trace-dir" in refused.stderr

    # A file of the wrong shape, a path that is not there and a directory are each named, with the fix.
    (tmp_path / "shape.json").write_text('{"resourceSpans": "x"}')
    for given, says in [
        ("shape.json", "shape.json: not a valid OTLP JSON trace: expected resourceSpans, a list of objects with"),
        ("gone.json", "gone.json: no such trace file"),
        ("traces", "traces is a directory; give a trace file, or a run id with --dir"),
    ]:
        proc = cli_here("trace", str(tmp_path / given))
        assert proc.returncode in (1, 2) and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert given == "traces" or proc.stderr.count(str(tmp_path)) == 1  # the path once, not twice


def test_console_exporter_writes_to_stderr_never_to_stdio_stdout() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "researcher", "arguments": {"task": "bees"}},
    }
    proc = subprocess.run(
        [MCP_TEAM, "serve"],
        input=stdio_lines(initialize(), INITIALIZED, call),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_env(MCP_TEAM_MODEL="offline", OTEL_TRACES_EXPORTER="console"),
    )
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in proc.stdout.splitlines() if line.strip())
    assert '"invoke_agent researcher"' in proc.stderr


def test_otlp_over_grpc_and_a_trace_file_in_a_directory_not_there_yet(tmp_path: Path) -> None:
    """One run, exporting both ways at once: to a gRPC collector, and to a --jaeger-json file (without
    --trace-dir: through a directory of its own) in a directory not there yet. The file used to fail after the
    run (exit 1, the answer printed); the directory is made first now, as --record's (a path that can never be
    written is a usage error before the run: tests/cli/test_cli.py)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[str] = []

    class Collector(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # type: ignore[no-untyped-def]
            received.extend(s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        env = clean_env(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
        jaeger = tmp_path / "missing" / "run.json"
        proc = subprocess.run(
            [MCP_TEAM, "run", "--ephemeral", "--model", "offline", "--quiet", "--jaeger-json", str(jaeger),
             "Research bees"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )  # fmt: skip
    finally:
        server.stop(grace=None)
    assert "[offline researcher]" in proc.stdout and proc.returncode == 0, proc.stderr
    assert "invoke_agent supervisor" in received and "invoke_agent researcher" in received
    assert json.loads(jaeger.read_text())["resourceSpans"]


async def test_error_text_on_spans_is_redacted(spans) -> None:
    from mcp_team.llm import ModelSet
    from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
    from mcp_team.specialists import Specialist, Tool, ToolFailed, run_specialist

    content.register_secret(SECRET)

    async def leaky(args: dict) -> str:
        raise ToolFailed(f"could not fetch https://api.example/?key={SECRET}")

    agent = Specialist(
        name="fetcher", description="d", system_prompt="p", tools=(Tool("leaky", "d", {"type": "object"}, leaky),)
    )
    model = ScriptedModel([tool_calls(("leaky", {})), text("gave up")])
    await run_specialist(agent, "fetch it", ModelSet.single(model))

    tool_span = spans.one("execute_tool leaky")
    assert tool_span.status.status_code.name == "ERROR"
    assert SECRET not in (tool_span.status.description or "") and "[redacted]" in (tool_span.status.description or "")
