"""Opt-in content capture and secret redaction for span attributes and run records.

Content (prompts, model output, tool arguments and results) is recorded only when the user asks
for it through `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, and every string is redacted
first: registered secrets (the API key, bearer tokens) plus well-known secret shapes.

The variable is read at the edge (the CLI, when it starts tracing), which turns capture on with
`set_capture_enabled(parse_capture_mode(value))`; this module reads no environment. A library caller
does the same to record content on its spans; without, it is off.

Stdlib only: the span helpers call `capture_enabled()` on every span.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
import traceback
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CAPTURE_ENV",
    "REDACTED",
    "RedactingFilter",
    "capture_enabled",
    "clear_secrets",
    "parse_capture_mode",
    "redact",
    "redact_value",
    "register_secret",
    "set_capture_enabled",
    "to_json",
]

_log = logging.getLogger("mcp_team.telemetry")

CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
REDACTED: Final = "[redacted]"

# -- content capture ---------------------------------------------------------------------------------

# Legacy spelling (true/false) and latest-experimental spelling (NO_CONTENT | SPAN_ONLY | EVENT_ONLY |
# SPAN_AND_EVENT). We only write span attributes, so only the span modes turn capture on.
_CAPTURE_VALUES: Final[dict[str, bool]] = {
    "true": True,
    "false": False,
    "no_content": False,
    "span_only": True,
    "event_only": False,
    "span_and_event": True,
}

_capture = False


def parse_capture_mode(value: str | None) -> bool:
    """Whether a value of `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` means "record content on spans".

    Unknown values mean off (with a warning): a typo must never start recording prompts.
    """
    if value is None or not value.strip():
        return False
    key = value.strip().lower()
    if key in _CAPTURE_VALUES:
        return _CAPTURE_VALUES[key]
    _log.warning(
        "%s=%r is not recognised (allowed: true, false, NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT); "
        "content capture stays off",
        CAPTURE_ENV,
        value,
    )
    return False


def capture_enabled() -> bool:
    """Whether message/tool content may be recorded on spans: as `set_capture_enabled` last said; off by default."""
    return _capture


def set_capture_enabled(enabled: bool | None) -> None:
    """Turn content capture on or off for this process (the CLI: from the variable's value, see
    `parse_capture_mode`); None: back to the default, off."""
    global _capture
    _capture = bool(enabled)


# -- redaction ---------------------------------------------------------------------------------------

_MIN_SECRET_LEN: Final = 8  # from this length a secret is removed even inside other text
_MIN_REDACTABLE_LEN: Final = 4  # shorter ones would match ordinary words and numbers
_secrets_lock = threading.Lock()
_secrets: set[str] = set()
_secrets_re: re.Pattern[str] | None = None

# Keys whose values are secrets, whatever the value looks like.
_SECRET_KEYS: Final = (
    r"authorization|proxy[-_]authorization|x[-_]api[-_]key|api[-_]?key|access[-_]?token|refresh[-_]?token"
    r"|id[-_]?token|auth[-_]?token|client[-_]?secret|secret[-_]?key|private[-_]?key|password|passwd"
)
_SECRET_KEY_RE: Final = re.compile(rf"^(?:{_SECRET_KEYS})$", re.IGNORECASE)

# Quoted pair: "api_key": "value", 'x-api-key' = 'value', authorization: "Bearer x".
_QUOTED_PAIR_RE: Final = re.compile(
    rf"""(?P<key>(?<![A-Za-z0-9])["']?(?:{_SECRET_KEYS})["']?\s*[:=]\s*)(?P<q>["'])(?P<val>(?:\\.|(?!(?P=q))[^\\])*)(?P=q)""",
    re.IGNORECASE,
)
# Unquoted pair: api_key=value, x-api-key: value, Authorization: Bearer value (header lines, query strings).
_BARE_PAIR_RE: Final = re.compile(
    rf"""(?P<key>(?<![A-Za-z0-9])(?:{_SECRET_KEYS})\s*[:=]\s*)"""
    r"""(?P<val>(?:(?:Bearer|Basic|Token|Digest)\s+)?(?!\[redacted\])[^\s,;&"'<>{}\[\]]+)""",
    re.IGNORECASE,
)
_BEARER_RE: Final = re.compile(r"(?P<scheme>\b(?:Bearer|Basic))\s+(?!\[redacted\])[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
# Anthropic keys (sk-ant-api03-…, sk-ant-admin01-…) and generic long sk- tokens (OpenAI and friends).
_ANTHROPIC_KEY_RE: Final = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
_SK_TOKEN_RE: Final = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}")


def register_secret(value: str | None) -> None:
    """Remember a secret (API key, bearer token) so `redact` always removes it.

    A secret of 8 characters or more is removed wherever it appears. A shorter one is removed where it stands
    alone (not inside a longer word, which it would otherwise mangle), and the operator is warned once, since
    a short secret is also easy to guess; one under 4 characters cannot be told from ordinary text and is
    only warned about. Values that the marker `[redacted]` itself contains are ignored (they could never be
    removed).
    """
    global _secrets_re
    if not value or not str(value).strip():
        return
    value = str(value)
    if value in REDACTED:
        return
    with _secrets_lock:
        if value in _secrets:
            return
        _secrets.add(value)
        if len(value) < _MIN_SECRET_LEN:
            _warn_short(len(value))
        # Longest first so a secret that contains another is removed whole.
        ordered = sorted((s for s in _secrets if len(s) >= _MIN_REDACTABLE_LEN), key=len, reverse=True)
        _secrets_re = re.compile("|".join(_secret_pattern(s) for s in ordered)) if ordered else None


def _secret_pattern(secret: str) -> str:
    escaped = re.escape(secret)
    return escaped if len(secret) >= _MIN_SECRET_LEN else rf"(?<![A-Za-z0-9_]){escaped}(?![A-Za-z0-9_])"


def _warn_short(length: int) -> None:
    # Never the value itself, nor a hint of it: only how long it is.
    if length < _MIN_REDACTABLE_LEN:
        _log.warning(
            "a configured secret is only %d character(s) long: too short to redact without mangling ordinary "
            "text, so it may appear in logs, spans and run records; use a secret of %d or more characters",
            length,
            _MIN_SECRET_LEN,
        )
    else:
        _log.warning(
            "a configured secret is short (%d characters): it is redacted only where it stands alone, and short "
            "secrets are easy to guess; use %d or more characters",
            length,
            _MIN_SECRET_LEN,
        )


def clear_secrets() -> None:
    """Forget every registered secret (for tests)."""
    global _secrets_re
    with _secrets_lock:
        _secrets.clear()
        _secrets_re = None


def _redact_pair(match: re.Match[str]) -> str:
    q = match.groupdict().get("q") or ""
    return f"{match.group('key')}{q}{REDACTED}{q}"


def redact(text: str) -> str:
    """`text` with registered secrets and well-known secret shapes replaced by `[redacted]`. Never raises."""
    if not text:
        return text
    try:
        secrets_re = _secrets_re
        if secrets_re is not None:
            text = secrets_re.sub(REDACTED, text)
        text = _QUOTED_PAIR_RE.sub(_redact_pair, text)
        text = _BARE_PAIR_RE.sub(_redact_pair, text)
        text = _BEARER_RE.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
        text = _ANTHROPIC_KEY_RE.sub(REDACTED, text)
        text = _SK_TOKEN_RE.sub(REDACTED, text)
        if secrets_re is not None:
            # Shape rules only cut text out, but run the secrets again so none can survive.
            text = secrets_re.sub(REDACTED, text)
        return text
    except Exception:  # pragma: no cover - defensive: redaction must never break a run
        _log.exception("redaction failed; dropping the text")
        return REDACTED


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and _SECRET_KEY_RE.match(key.strip()) is not None


def redact_value(value: Any) -> Any:
    """A copy of `value` with every string redacted, recursively through dicts, lists and tuples.

    Values stored under a secret-looking key (`api_key`, `authorization`, `password`, …) are
    replaced whole. Other types are returned unchanged.
    """
    return _redact_value(value, 0)


def _redact_value(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return redact(value)
    if depth > 100:
        return value
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if _is_secret_key(k) and isinstance(v, str) and v else _redact_value(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact_value(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(v, depth + 1) for v in value)
    return value


# -- JSON with truncation inside the structure ---------------------------------------------------------

_MAX_DEPTH: Final = 32


def _cut(text: str, max_string: int) -> str:
    text = redact(text)
    if len(text) > max_string:
        return f"{text[:max_string]}…[+{len(text) - max_string} chars]"
    return text


def _jsonable(value: Any, max_string: int, max_items: int, depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _cut(value, max_string)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if depth >= _MAX_DEPTH:
        return "…[too deep]"
    # Pydantic models and dataclasses become their fields.
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            value = dump(mode="json")
        except Exception:
            return _cut(repr(value), max_string)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        if id(value) in seen:
            return "…[cycle]"
        seen.add(id(value))
        try:
            if isinstance(value, Mapping):
                out: dict[str, Any] = {}
                items = list(value.items())
                for k, v in items[:max_items]:
                    key = _cut(k if isinstance(k, str) else str(k), max_string)
                    if _is_secret_key(k) and isinstance(v, str) and v:
                        out[key] = REDACTED
                    else:
                        out[key] = _jsonable(v, max_string, max_items, depth + 1, seen)
                if len(items) > max_items:
                    out["…"] = f"[+{len(items) - max_items} keys]"
                return out
            seq = list(value)
            if isinstance(value, set | frozenset):
                seq.sort(key=repr)
            result = [_jsonable(v, max_string, max_items, depth + 1, seen) for v in seq[:max_items]]
            if len(seq) > max_items:
                result.append(f"…[+{len(seq) - max_items} items]")
            return result
        finally:
            seen.discard(id(value))
    try:
        text = str(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return _cut(text, max_string)


def to_json(value: Any, *, max_string: int = 2000, max_items: int = 50) -> str:
    """`value` as a JSON string for a span attribute: redacted, truncated inside the structure, always valid.

    Long strings end with `…[+N chars]`, long lists with a `…[+N items]` element, big dicts with a
    `"…"` key. Non-finite floats, bytes and unknown objects become strings; cycles are cut.
    """
    max_string = max(0, max_string)
    max_items = max(0, max_items)
    try:
        data = _jsonable(value, max_string, max_items, 0, set())
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except Exception:  # pragma: no cover - defensive
        _log.exception("could not serialise content")
        return json.dumps("<unserialisable>")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (e.g. from bad bytes decoded with surrogateescape) cannot go over OTLP.
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message, for the handlers mcp-team installs."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), ()
        if record.exc_info:  # format the traceback now, redacted, instead of letting the handler do it
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip())
            record.exc_info = None
        return True
