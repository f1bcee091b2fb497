"""Export configuration from the standard OpenTelemetry variables, and the one call that installs it.

Policy: tracing is on only when the user asked for it (`OTEL_TRACES_EXPORTER=otlp|console`, an OTLP
endpoint variable, `MCP_TEAM_TRACE_DIR`, or an explicit override from the CLI).
`OTEL_SDK_DISABLED=true` always wins. Otherwise `setup_tracing` installs nothing: the API's no-op
spans cost a few microseconds and nothing is exported.

The variables are read from the mapping given to `TracingConfig.from_env` (the CLI passes the process
environment); this module reads no environment itself.

This module imports neither the SDK nor any exporter at import time (the MCP server's cold start
must stay fast); `setup_tracing` imports them when tracing is really on.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast, get_args
from urllib.parse import urlsplit

from mcp_team import __version__

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from mcp_team.telemetry.tracefile import TraceFileProcessor

__all__ = ["DEFAULT_SERVICE_NAME", "Exporter", "Protocol", "Tracing", "TracingConfig", "setup_tracing"]

_log = logging.getLogger("mcp_team.telemetry")

Exporter = Literal["otlp", "console", "none"]
Protocol = Literal["http/protobuf", "grpc"]

DEFAULT_SERVICE_NAME: Final = "mcp-team"
DEFAULT_EXPORT_TIMEOUT: Final = 2.0  # seconds; a dead collector must not hold up a tool call or shutdown
DEFAULT_HTTP_ENDPOINT: Final = "http://localhost:4318/v1/traces"
DEFAULT_GRPC_ENDPOINT: Final = "http://localhost:4317"
SCHEDULE_DELAY_MILLIS: Final = 500

_EXPORTERS: Final[tuple[str, ...]] = get_args(Exporter)
_PROTOCOLS: Final[tuple[str, ...]] = get_args(Protocol)

TRACE_DIR_ENV: Final = "MCP_TEAM_TRACE_DIR"


def _get(env: Mapping[str, str], name: str) -> str | None:
    """The stripped value of `name`, or None when unset or blank (blank means unset in the OTel spec)."""
    value = env.get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def _parse_exporter(value: str, source: str) -> Exporter:
    """First entry of a comma list such as `otlp,console`; every entry must be known."""
    items = [item.strip().lower() for item in value.split(",") if item.strip()]
    unknown = [item for item in items if item not in _EXPORTERS]
    if unknown:
        raise ValueError(
            f"{source}={value!r}: unsupported exporter {unknown[0]!r}; allowed values: {', '.join(_EXPORTERS)}"
        )
    if not items:
        raise ValueError(f"{source}={value!r} is empty; allowed values: {', '.join(_EXPORTERS)}")
    if len(items) > 1:
        _log.warning("%s=%r: only one exporter is supported, using %r", source, value, items[0])
    return cast(Exporter, items[0])


def _parse_protocol(value: str, source: str) -> Protocol:
    proto = value.strip().lower()
    if proto not in _PROTOCOLS:
        hint = " (the Python SDK has no OTLP/HTTP JSON exporter)" if proto == "http/json" else ""
        raise ValueError(f"{source}={value!r} is not supported{hint}; allowed values: {', '.join(_PROTOCOLS)}")
    return cast(Protocol, proto)


def _parse_timeout(value: str | float, source: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source}={value!r} is not a number of seconds (e.g. 2 or 0.5)") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{source}={value!r} must be a positive number of seconds")
    return seconds


def _traces_url(base: str) -> str:
    """`OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL: the signal path is appended (spec rule)."""
    return base.rstrip("/") + "/v1/traces"


def _has_path(url: str) -> bool:
    try:
        return urlsplit(url).path not in ("", "/")
    except ValueError:
        return False


# gRPC's own name schemes (its naming doc): what the gRPC exporter hands to gRPC unchanged.
_GRPC_TARGETS = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:", "xds:")


def _check_endpoint(endpoint: str, protocol: Protocol) -> None:
    """`ValueError` for an endpoint no exporter can send to: it was taken, and every export failed later (an
    `ftp://` URL, a host that does not parse). gRPC's may also be a bare `host:port` or a target of gRPC's own
    (`unix:///run/otel.sock`, `dns:///collector:4317`), which its exporter passes to gRPC as it is."""
    example = "http://localhost:4317" if protocol == "grpc" else "http://localhost:4318"
    if protocol == "grpc" and ("://" not in endpoint or endpoint.lower().startswith(_GRPC_TARGETS)):
        return
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 (parses the port: `http://h:x` raises here)
    except ValueError as exc:
        raise ValueError(f"OTLP endpoint {endpoint!r} is not a valid URL ({exc}); use one such as {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"OTLP endpoint {endpoint!r} must be an http:// or https:// URL such as {example}")


@dataclass
class TracingConfig:
    """Where spans go. Build it with `TracingConfig.from_env()`; fields are final values.

    `exporter` is `"none"` unless the user asked for export. `endpoint` is the full URL the
    exporter posts to (for `http/protobuf`, including `/v1/traces`), or None for the protocol's
    default on localhost. `trace_dir`, when set, gets one OTLP JSON trace file per run.
    """

    exporter: Exporter = "none"
    protocol: Protocol = "http/protobuf"
    endpoint: str | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    trace_dir: Path | None = None
    disabled: bool = False
    export_timeout: float = DEFAULT_EXPORT_TIMEOUT
    # The values of the OTLP header variables (a collector's auth token): kept out of captured content.
    header_secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def enabled(self) -> bool:
        """True when `setup_tracing` would install a provider."""
        return not self.disabled and (self.exporter != "none" or self.trace_dir is not None)

    @property
    def resolved_endpoint(self) -> str:
        """The URL the OTLP exporter uses (the protocol's localhost default when none was configured)."""
        if self.endpoint:
            return self.endpoint
        return DEFAULT_GRPC_ENDPOINT if self.protocol == "grpc" else DEFAULT_HTTP_ENDPOINT

    def describe(self) -> str:
        """One line for logs / `--help` diagnostics, e.g. `otlp http/protobuf -> http://…/v1/traces`."""
        if not self.enabled:
            return "tracing off (OTEL_SDK_DISABLED)" if self.disabled else "tracing off"
        parts = []
        if self.exporter == "otlp":
            parts.append(f"otlp {self.protocol} -> {self.resolved_endpoint}")
        elif self.exporter == "console":
            parts.append("console (stderr)")
        if self.trace_dir is not None:
            parts.append(f"trace files -> {self.trace_dir}")
        return f"tracing on, service {self.service_name!r}: " + ", ".join(parts)

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides: Any) -> TracingConfig:
        """Read the standard variables from `env` (the CLI passes `os.environ`); non-None `overrides` win.

        Overrides are field names (`exporter`, `protocol`, `endpoint`, `service_name`, `trace_dir`,
        `disabled`, `export_timeout`); None means "not given" so CLI flags can be passed straight
        through. An `endpoint` override is a full URL, except that a bare `scheme://host:port` gets
        `/v1/traces` appended for http/protobuf. Bad values raise `ValueError` naming the variable.
        """
        known = {f.name for f in fields(cls)} - {"header_secrets"}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown TracingConfig override(s): {', '.join(sorted(unknown))}")
        ov = {k: v for k, v in overrides.items() if v is not None}

        # OTEL_SDK_DISABLED: the spec says anything but "true" is false.
        disabled = (_get(env, "OTEL_SDK_DISABLED") or "").lower() == "true"
        if "disabled" in ov:
            disabled = disabled or bool(ov["disabled"])

        # Protocol: the traces-specific variable beats the general one.
        protocol: Protocol = "http/protobuf"
        if "protocol" in ov:
            protocol = _parse_protocol(str(ov["protocol"]), "protocol override")
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")) is not None:
            protocol = _parse_protocol(value, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_PROTOCOL")) is not None:
            protocol = _parse_protocol(value, "OTEL_EXPORTER_OTLP_PROTOCOL")

        # Endpoint: TRACES_ENDPOINT is a full URL; ENDPOINT a base URL (http gets /v1/traces appended).
        endpoint: str | None = None
        if "endpoint" in ov:
            endpoint = str(ov["endpoint"]).strip() or None
            if endpoint and protocol == "http/protobuf" and not _has_path(endpoint):
                endpoint = _traces_url(endpoint)
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) is not None:
            endpoint = value
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_ENDPOINT")) is not None:
            endpoint = _traces_url(value) if protocol == "http/protobuf" else value

        # Exporter: explicit choice, else implied by an endpoint, else none.
        exporter: Exporter
        if "exporter" in ov:
            exporter = _parse_exporter(str(ov["exporter"]), "exporter override")
        elif (value := _get(env, "OTEL_TRACES_EXPORTER")) is not None:
            exporter = _parse_exporter(value, "OTEL_TRACES_EXPORTER")
        elif endpoint is not None:
            exporter = "otlp"
        else:
            exporter = "none"
        if endpoint is not None and exporter == "otlp" and not disabled:  # an endpoint nothing sends to is no error
            _check_endpoint(endpoint, protocol)

        service_name = str(ov.get("service_name") or _get(env, "OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME)

        trace_dir: Path | None = None
        if "trace_dir" in ov:
            trace_dir = Path(ov["trace_dir"]).expanduser() if str(ov["trace_dir"]).strip() else None
        elif (value := _get(env, TRACE_DIR_ENV)) is not None:
            trace_dir = Path(value).expanduser()

        export_timeout = DEFAULT_EXPORT_TIMEOUT
        if "export_timeout" in ov:
            export_timeout = _parse_timeout(ov["export_timeout"], "export_timeout override")
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")) is not None:
            export_timeout = _parse_timeout(value, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
        elif (value := _get(env, "OTEL_EXPORTER_OTLP_TIMEOUT")) is not None:
            export_timeout = _parse_timeout(value, "OTEL_EXPORTER_OTLP_TIMEOUT")

        return cls(
            exporter=exporter,
            protocol=protocol,
            endpoint=endpoint,
            service_name=service_name,
            trace_dir=trace_dir,
            disabled=disabled,
            export_timeout=export_timeout,
            header_secrets=_header_secrets(env),
        )


def _run_bounded(fn: Callable[[], object], timeout_s: float, name: str) -> tuple[bool, object]:
    """Run `fn` in a daemon thread and wait at most `timeout_s` (the SDK's batch flush ignores its timeout)."""
    result: list[object] = []

    def target() -> None:
        try:
            result.append(fn())
        except Exception:
            _log.exception("%s failed", name)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))
    if thread.is_alive():
        _log.warning("%s did not finish within %.1fs; spans may be lost", name, timeout_s)
        return False, None
    return bool(result), result[0] if result else None


class Tracing:
    """An installed SDK pipeline: flush it after each top-level tool call, shut it down on exit."""

    def __init__(
        self, provider: TracerProvider, config: TracingConfig, trace_files: TraceFileProcessor | None = None
    ) -> None:
        self.provider = provider
        self.config = config
        self.trace_files = trace_files
        self._lock = threading.Lock()
        self._shut_down = False
        atexit.register(self.shutdown)

    @property
    def is_shut_down(self) -> bool:
        return self._shut_down

    def flush(self, timeout_millis: int = 2000) -> bool:
        """Export everything ended so far; returns within about `timeout_millis` (False if it did not finish).

        Blocking: from async code call it through `anyio.to_thread.run_sync(tracing.flush)`.
        """
        if self._shut_down:
            return False
        finished, value = _run_bounded(
            lambda: self.provider.force_flush(timeout_millis), timeout_millis / 1000, "mcp-team-otel-flush"
        )
        return finished and value is not False

    def shutdown(self, timeout_millis: int = 3000) -> None:
        """Flush and stop exporting (idempotent, bounded by about `timeout_millis`)."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        atexit.unregister(self.shutdown)
        _run_bounded(self.provider.shutdown, timeout_millis / 1000, "mcp-team-otel-shutdown")


def _header_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the OTLP header variables (collector auth tokens): they must never show up in captured
    content. (The exporter reads the variables itself, as the OpenTelemetry SDK does.)"""
    secrets = []
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        for pair in (env.get(name) or "").split(","):
            _, sep, value = pair.partition("=")
            if sep and value.strip():
                secrets.append(value.strip())
    return tuple(secrets)


def _otlp_exporter(config: TracingConfig) -> Any:
    endpoint = config.resolved_endpoint
    if config.protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError:
            raise ValueError(
                "OTLP protocol 'grpc' needs the gRPC exporter: pip install opentelemetry-exporter-otlp-proto-grpc "
                "(or use OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, port 4318)"
            ) from None
        return GrpcSpanExporter(endpoint=endpoint, timeout=config.export_timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, timeout=config.export_timeout)


def setup_tracing(config: TracingConfig, *, set_global: bool = True) -> Tracing | None:
    """Install an SDK `TracerProvider` exporting as `config` says; None (and nothing installed) when off.

    `set_global=False` builds the pipeline without making it the global provider (tests, embedding).
    Raises `ValueError` for an unusable configuration (e.g. grpc without its package).
    """
    if not config.enabled:
        return None

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter | None = None
    if config.exporter == "otlp":
        from mcp_team.telemetry.export_watch import WatchedExporter

        exporter = WatchedExporter(_otlp_exporter(config), config.resolved_endpoint)
    elif config.exporter == "console":
        # Never stdout: with the stdio transport stdout *is* the MCP protocol stream.
        exporter = ConsoleSpanExporter(out=sys.stderr)

    resource = Resource.create({"service.name": config.service_name, "service.version": __version__})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)

    trace_files: TraceFileProcessor | None = None
    if config.trace_dir is not None:
        from mcp_team.telemetry.tracefile import TraceFileProcessor

        trace_files = TraceFileProcessor(config.trace_dir)
        provider.add_span_processor(trace_files)
    if exporter is not None:
        timeout_ms = int(config.export_timeout * 1000)
        provider.add_span_processor(
            BatchSpanProcessor(exporter, schedule_delay_millis=SCHEDULE_DELAY_MILLIS, export_timeout_millis=timeout_ms)
        )

    from mcp_team.telemetry.content import register_secret

    for secret in config.header_secrets:
        register_secret(secret)
    if set_global:
        before = trace.get_tracer_provider()
        trace.set_tracer_provider(provider)
        if trace.get_tracer_provider() is not provider:
            _log.warning(
                "a global TracerProvider (%s) was already installed; mcp-team spans keep going there",
                type(before).__name__,
            )
    _log.info("%s", config.describe())
    return Tracing(provider, config, trace_files)
