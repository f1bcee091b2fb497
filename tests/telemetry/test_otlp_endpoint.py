"""An OTLP endpoint no exporter can send to is refused at start, in one line with an example: an `ftp://` URL, a
host or port that does not parse. They were taken, and every export failed once runs went (`mcp-team run` went
on and its spans were lost)."""

from __future__ import annotations

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]


@pytest.mark.parametrize(
    ("flags", "env", "said"),
    [
        (["--otlp-endpoint", "ftp://127.0.0.1:4318"], {}, "must be an http:// or https:// URL"),
        (["--otlp-endpoint", "http://[::1"], {}, "is not a valid URL (Invalid IPv6 URL)"),
        (["--otlp-endpoint", "http://collector:43l8"], {}, "is not a valid URL (Port could not be cast"),
        ([], {"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector"}, "must be an http:// or https:// URL"),
        ([], {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://c:4317"}, "http://"),
    ],
)
def test_an_endpoint_that_cannot_be_sent_to_is_refused(flags: list[str], env: dict[str, str], said: str) -> None:
    done = cli_here("run", "--ephemeral", "--model", "offline", *flags, "Research bees", **env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("mcp-team: error: tracing: OTLP endpoint ") and said in lines[-1], done.stderr
    assert "mcp-team: run " not in done.stderr  # refused before any run


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (["--otlp-endpoint", "https://collector.example.com"], {}),
        ([], {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4317"}),
    ],
)
def test_usable_endpoints_are_taken(flags: list[str], env: dict[str, str]) -> None:
    done = cli_here("run", "--ephemeral", "--model", "offline", "--trace-exporter", "none", *flags, "hi", **env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "env",
    [
        # Not used, so not checked: tracing off, or no OTLP exporter (OTEL_* variables are often inherited).
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://collector:4317"},
        # gRPC's own targets, which its exporter passes to gRPC as they are.
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "unix:///tmp/no-collector.sock"},
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "dns:///127.0.0.1:9"},
    ],
)
def test_an_endpoint_nothing_sends_to_or_a_grpc_target_is_no_error(env: dict[str, str]) -> None:
    done = cli_here("run", "--ephemeral", "--model", "offline", "hi", **env)
    assert done.returncode == 0, done.stderr
