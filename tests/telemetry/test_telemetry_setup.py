"""Tracing configuration from the standard OTel variables, and `setup_tracing` end to end.

The global tracer provider can be set once per process (conftest already set one), so everything
that installs a provider globally runs in a subprocess.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcp_team.telemetry.setup import DEFAULT_EXPORT_TIMEOUT, TracingConfig, setup_tracing
from support import HANG_GUARD, clean_env
from support.otlp_receiver import OTLPReceiver

pytestmark = [pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]


def run_py(script: str, env: dict[str, str], timeout: float = HANG_GUARD) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


# A small run through the real span helpers: supervisor -> plan chat, handoff -> researcher -> chat.
RUN_SCRIPT = """
import json, os, sys
from mcp_team.telemetry import spans
from mcp_team.telemetry.setup import TracingConfig, setup_tracing

tracing = setup_tracing(TracingConfig.from_env(os.environ))
assert tracing is not None, "tracing should be on"
with spans.conversation("run-1"):
    with spans.agent_span("supervisor", provider="anthropic") as sup:
        with spans.chat_span("claude-sonnet-5-5", "anthropic", "plan", 1024) as chat:
            spans.record_usage(chat, 100, 20)
        with spans.transfer_span("supervisor", "researcher", "toolu_1", "h1", 1):
            with spans.agent_span("researcher", provider="anthropic"):
                with spans.chat_span("claude-haiku-5-5", "anthropic", "specialist", 512) as chat:
                    spans.record_usage(chat, 50, 10)
        spans.record_usage(sup, 150, 30)
    trace_id = spans.current_trace_id()
flushed = tracing.flush()
tracing.shutdown()
tracing.shutdown()  # idempotent
files = [str(p) for p in tracing.trace_files.written] if tracing.trace_files else []
print(json.dumps({"flushed": flushed, "files": files}), file=sys.stderr)
"""


def _last_json(stderr: str) -> dict[str, object]:
    return json.loads([line for line in stderr.splitlines() if line.startswith("{")][-1])  # type: ignore[no-any-return]


# -- configuration policy -------------------------------------------------------------------------


def test_off_by_default() -> None:
    config = TracingConfig.from_env({})
    assert config.exporter == "none"
    assert not config.enabled
    assert config.service_name == "mcp-team"
    assert config.export_timeout == DEFAULT_EXPORT_TIMEOUT <= 5
    assert config.trace_dir is None
    assert setup_tracing(config) is None


@pytest.mark.parametrize(
    ("env", "exporter"),
    [
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "Console"}, "console"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
        ({"MCP_TEAM_TRACE_DIR": "/tmp/traces"}, "none"),
    ],
)
def test_each_trigger_turns_tracing_on(env: dict[str, str], exporter: str) -> None:
    config = TracingConfig.from_env(env)
    assert config.enabled
    assert config.exporter == exporter


@pytest.mark.parametrize(
    "overrides",
    [{"exporter": "otlp"}, {"exporter": "console"}, {"endpoint": "http://h:4318"}, {"trace_dir": "/tmp/t"}],
)
def test_overrides_turn_tracing_on(overrides: dict[str, str]) -> None:
    assert TracingConfig.from_env({}, **overrides).enabled


def test_unrelated_settings_and_none_overrides_do_not_turn_tracing_on() -> None:
    env = {"OTEL_SERVICE_NAME": "svc", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TIMEOUT": "3"}
    config = TracingConfig.from_env(env, exporter=None, endpoint=None, trace_dir=None, service_name="other")
    assert not config.enabled
    assert config.service_name == "other"


def test_exporter_none_beats_an_endpoint() -> None:
    env = {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}
    assert not TracingConfig.from_env(env).enabled
    assert TracingConfig.from_env({**env, "MCP_TEAM_TRACE_DIR": "/tmp/t"}).enabled  # files only


@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_sdk_disabled_always_wins(value: str) -> None:
    env = {
        "OTEL_SDK_DISABLED": value,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318",
        "MCP_TEAM_TRACE_DIR": "/tmp/t",
    }
    config = TracingConfig.from_env(env, exporter="console", trace_dir="/tmp/x", disabled=False)
    assert config.disabled
    assert not config.enabled
    assert setup_tracing(config) is None
    assert "off" in config.describe()


def test_sdk_disabled_other_values_and_override() -> None:
    assert TracingConfig.from_env({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}).enabled
    assert not TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp"}, disabled=True).enabled


@pytest.mark.parametrize(
    ("env", "endpoint"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}, "http://h:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318/"}, "http://h:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h/otlp"}, "https://h/otlp/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:9999/custom"}, "http://h:9999/custom"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"},
            "http://t/x",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http://h:4317"),
    ],
)
def test_endpoint_base_vs_traces_url(env: dict[str, str], endpoint: str) -> None:
    config = TracingConfig.from_env(env)
    assert config.endpoint == endpoint
    assert config.resolved_endpoint == endpoint


def test_endpoint_override_and_defaults() -> None:
    assert TracingConfig.from_env({}, endpoint="http://h:4318").endpoint == "http://h:4318/v1/traces"
    assert TracingConfig.from_env({}, endpoint="http://h:4318/v1/traces").endpoint == "http://h:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318"}
    assert TracingConfig.from_env(env, endpoint="http://flag:4318").endpoint == "http://flag:4318/v1/traces"
    otlp = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp"})
    assert otlp.endpoint is None
    assert otlp.resolved_endpoint == "http://localhost:4318/v1/traces"
    grpc = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.resolved_endpoint == "http://localhost:4317"


def test_protocol_traces_variable_wins() -> None:
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}
    assert TracingConfig.from_env(env).protocol == "http/protobuf"
    assert TracingConfig.from_env({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).protocol == "grpc"


def test_exporter_comma_list_takes_the_first() -> None:
    assert TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "console, otlp"}).exporter == "console"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, ["OTEL_TRACES_EXPORTER", "zipkin", "otlp, console, none"]),
        ({"OTEL_TRACES_EXPORTER": "otlp,jaeger"}, ["OTEL_TRACES_EXPORTER", "jaeger", "otlp, console, none"]),
        ({"OTEL_TRACES_EXPORTER": ","}, ["OTEL_TRACES_EXPORTER", "otlp, console, none"]),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ["OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf, grpc"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"]),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, ["OTEL_EXPORTER_OTLP_TIMEOUT", "seconds"]),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, ["OTEL_EXPORTER_OTLP_TIMEOUT", "positive"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, ["localhost:4318", "URL"]),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], names: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        TracingConfig.from_env(env)
    for name in names:
        assert name in str(info.value)


def test_bad_override_values() -> None:
    with pytest.raises(ValueError, match="otlp, console, none"):
        TracingConfig.from_env({}, exporter="jaeger")
    with pytest.raises(TypeError, match="colour"):
        TracingConfig.from_env({}, colour="red")


def test_timeout_and_service_name_from_env() -> None:
    config = TracingConfig.from_env(
        {"OTEL_EXPORTER_OTLP_TIMEOUT": "5", "OTEL_SERVICE_NAME": "agents", "OTEL_TRACES_EXPORTER": "otlp"}
    )
    assert config.export_timeout == 5.0
    assert config.service_name == "agents"
    both = {"OTEL_EXPORTER_OTLP_TIMEOUT": "5", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0.5"}
    assert TracingConfig.from_env(both).export_timeout == 0.5
    assert TracingConfig.from_env(both, export_timeout=1).export_timeout == 1.0


def test_trace_dir_from_env(tmp_path: Path) -> None:
    config = TracingConfig.from_env({"MCP_TEAM_TRACE_DIR": str(tmp_path)})
    assert config.trace_dir == tmp_path
    assert "trace files" in config.describe()
    assert TracingConfig.from_env({"MCP_TEAM_TRACE_DIR": "  "}).trace_dir is None


def test_otlp_header_values_are_kept_out_of_captured_content(tmp_path: Path) -> None:
    """A collector's token in the OTLP header variables is read from the mapping given (the CLI's environment),
    never shown by the config, and registered as a secret when the pipeline is installed."""
    from mcp_team.telemetry import content

    env = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer collector-sekrit-1,x-team=blue-team-42",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key = traces-sekrit-2 "}  # fmt: skip
    config = TracingConfig.from_env(env, trace_dir=tmp_path)
    assert config.header_secrets == ("Bearer collector-sekrit-1", "blue-team-42", "traces-sekrit-2")
    assert "sekrit" not in repr(config) and "sekrit" not in config.describe()
    assert TracingConfig.from_env({}).header_secrets == ()
    assert content.redact("sent collector-sekrit-1") == "sent collector-sekrit-1"  # not yet: nothing installed
    tracing = setup_tracing(config, set_global=False)
    assert tracing is not None
    try:
        said = content.redact("sent Bearer collector-sekrit-1, traces-sekrit-2 and blue-team-42")
        assert "sekrit" not in said and "blue-team-42" not in said, said
    finally:
        tracing.shutdown()
        content.clear_secrets()


# -- setup_tracing in this process, without touching the global provider ------------------------------


def test_pipeline_without_global_provider(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opentelemetry import trace

    global_before = trace.get_tracer_provider()
    config = TracingConfig.from_env(
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "svc-x"}, trace_dir=tmp_path
    )
    tracing = setup_tracing(config, set_global=False)
    assert tracing is not None
    try:
        assert trace.get_tracer_provider() is global_before
        assert tracing.trace_files is not None
        assert tracing.trace_files.trace_dir == tmp_path
        resource = dict(tracing.provider.resource.attributes)
        assert resource["service.name"] == "svc-x"
        assert resource["service.version"]
        with tracing.provider.get_tracer("t").start_as_current_span("hello-console"):
            pass
        assert tracing.flush() is True
    finally:
        tracing.shutdown()
    tracing.shutdown()
    assert tracing.is_shut_down
    assert tracing.flush() is False
    out = capsys.readouterr()
    assert "hello-console" in out.err
    assert "hello-console" not in out.out


def test_grpc_without_its_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # It is a dependency, but an install can lose it; None in sys.modules makes the import fail.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    config = TracingConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(ValueError, match="pip install opentelemetry-exporter-otlp-proto-grpc"):
        setup_tracing(config, set_global=False)


# -- end to end, in subprocesses -------------------------------------------------------------------


def _check_run(rx: OTLPReceiver, service: str) -> None:
    wanted = {
        "invoke_agent supervisor",
        "chat claude-sonnet-5-5",
        "execute_tool transfer_to_researcher",
        "invoke_agent researcher",
        "chat claude-haiku-5-5",
    }
    got = rx.wait_for(lambda spans: wanted <= {s["name"] for s in spans})
    by_name = {s["name"]: s for s in got}
    sup = by_name["invoke_agent supervisor"]
    assert sup["parent_span_id"] is None
    assert len(sup["trace_id"]) == 32
    assert len(sup["span_id"]) == 16
    assert {s["trace_id"] for s in got} == {sup["trace_id"]}
    assert by_name["chat claude-sonnet-5-5"]["parent_span_id"] == sup["span_id"]
    transfer = by_name["execute_tool transfer_to_researcher"]
    assert transfer["parent_span_id"] == sup["span_id"]
    assert by_name["invoke_agent researcher"]["parent_span_id"] == transfer["span_id"]
    assert by_name["chat claude-haiku-5-5"]["parent_span_id"] == by_name["invoke_agent researcher"]["span_id"]
    assert by_name["chat claude-haiku-5-5"]["kind"] == "client"
    for span in got:
        assert span["attributes"]["gen_ai.conversation.id"] == "run-1"
        assert span["resource"]["service.name"] == service
        assert span["resource"]["service.version"]
    assert sup["attributes"]["gen_ai.agent.name"] == "supervisor"
    assert sup["attributes"]["gen_ai.usage.input_tokens"] == 150
    assert by_name["chat claude-sonnet-5-5"]["attributes"]["mcp_team.phase"] == "plan"


def test_end_to_end_otlp_http_base_endpoint() -> None:
    with OTLPReceiver() as rx:
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=rx.endpoint, OTEL_SERVICE_NAME="team-e2e")
        proc = run_py(RUN_SCRIPT, env)
        assert _last_json(proc.stderr)["flushed"] is True
        _check_run(rx, "team-e2e")
        assert rx.errors == []


def test_end_to_end_traces_endpoint_and_trace_dir(tmp_path: Path) -> None:
    from mcp_team.telemetry.tracefile import load_trace_file

    with OTLPReceiver() as rx:
        env = clean_env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=rx.traces_endpoint, MCP_TEAM_TRACE_DIR=str(tmp_path))
        proc = run_py(RUN_SCRIPT, env)
        _check_run(rx, "mcp-team")
    result = _last_json(proc.stderr)
    assert result["files"] == [str(tmp_path / "run-1.json")]
    doc = load_trace_file(tmp_path / "run-1.json")
    (resource_spans,) = doc["resourceSpans"]
    assert sum(len(s["spans"]) for s in resource_spans["scopeSpans"]) == 5
    assert {"key": "service.name", "value": {"stringValue": "mcp-team"}} in resource_spans["resource"]["attributes"]


def test_console_exporter_writes_to_stderr_not_stdout() -> None:
    script = """
    import os
    from mcp_team.telemetry import spans
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    tracing = setup_tracing(TracingConfig.from_env(os.environ))
    with spans.conversation("run-c"), spans.agent_span("supervisor"):
        pass
    tracing.flush()
    tracing.shutdown()
    """
    proc = run_py(script, clean_env(OTEL_TRACES_EXPORTER="console"))
    assert proc.stdout == ""
    assert "invoke_agent supervisor" in proc.stderr
    assert "run-c" in proc.stderr


def test_nothing_configured_installs_nothing_and_imports_no_sdk() -> None:
    script = """
    import os, sys
    from opentelemetry import trace
    from mcp_team.telemetry import spans
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    loaded = [m for m in sys.modules if m.startswith("opentelemetry.sdk") or m.startswith("opentelemetry.exporter")]
    assert loaded == [], loaded
    assert setup_tracing(TracingConfig.from_env(os.environ)) is None
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with spans.agent_span("supervisor") as span:
        assert not span.is_recording()
    loaded = [m for m in sys.modules if m.startswith("opentelemetry.sdk") or m.startswith("opentelemetry.exporter")]
    assert loaded == [], loaded
    print("ok")
    """
    proc = run_py(script, clean_env())
    assert proc.stdout.strip() == "ok"


def test_dead_collector_does_not_hold_up_flush_or_shutdown() -> None:
    # A collector that takes the connection and never answers, with an export timeout of an hour: unbounded,
    # flush and shutdown would wait for it; bounded, they give up and the process ends well within the guard.
    script = """
    import json, os, sys
    from mcp_team.telemetry import spans
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    tracing = setup_tracing(TracingConfig.from_env(os.environ))
    for i in range(20):
        with spans.conversation(f"run-{i}"), spans.agent_span("supervisor"):
            pass
    flushed = tracing.flush()
    with spans.agent_span("supervisor"):
        pass
    tracing.shutdown()
    print(json.dumps({"flushed": flushed, "shut_down": tracing.is_shut_down}), file=sys.stderr)
    """
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes the handshake; nobody ever reads or answers
        port = silent.getsockname()[1]
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_EXPORTER_OTLP_TIMEOUT="3600")
        proc = run_py(script, env)
    assert _last_json(proc.stderr) == {"flushed": False, "shut_down": True}
