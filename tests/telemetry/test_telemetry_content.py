"""Opt-in content capture, secret redaction and truncating JSON for span attributes."""

from __future__ import annotations

import json
import logging
import math
import os
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcp_team.telemetry import content
from mcp_team.telemetry.content import (
    CAPTURE_ENV,
    REDACTED,
    capture_enabled,
    parse_capture_mode,
    redact,
    redact_value,
    register_secret,
    to_json,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _clean_state() -> Iterator[None]:
    content.clear_secrets()
    content.set_capture_enabled(None)
    yield
    content.clear_secrets()
    content.set_capture_enabled(None)


# -- capture modes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", False),
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("false", False),
        ("NO_CONTENT", False),
        ("SPAN_ONLY", True),
        ("span_only", True),
        ("EVENT_ONLY", False),
        ("SPAN_AND_EVENT", True),
        ("yes-please", False),  # unknown: stays off
    ],
)
def test_capture_modes(value: str | None, expected: bool) -> None:
    assert parse_capture_mode(value) is expected


def test_capture_is_off_until_the_edge_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library reads no environment: the variable alone turns nothing on; the CLI reads it (start_tracing)."""
    monkeypatch.setenv(CAPTURE_ENV, "SPAN_ONLY")
    assert capture_enabled() is False
    content.set_capture_enabled(parse_capture_mode(os.environ[CAPTURE_ENV]))
    assert capture_enabled() is True
    content.set_capture_enabled(False)
    assert capture_enabled() is False
    content.set_capture_enabled(True)
    content.set_capture_enabled(None)  # back to the default
    assert capture_enabled() is False


# -- redaction: secret shapes ------------------------------------------------------------------------

ANTHROPIC_KEY = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdefXYZ"
OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"key is {ANTHROPIC_KEY}.", ANTHROPIC_KEY),
        (f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}", ANTHROPIC_KEY),
        (f"openai {OPENAI_KEY} here", OPENAI_KEY),
        ("Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9.payload-sig", "eyJhbGciOi.JIUzI1NiJ9.payload-sig"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA=="),
        ("bearer abc123def456", "abc123def456"),
        ("x-api-key: my-internal-key-123", "my-internal-key-123"),
        ("X-Api-Key=another_key_value", "another_key_value"),
        ("https://api.example.com/v1?api_key=qwertyuiop123&x=1", "qwertyuiop123"),
        ('{"api_key": "hunter2hunter2", "model": "m"}', "hunter2hunter2"),
        ("{'apiKey': 'hunter3hunter3'}", "hunter3hunter3"),
        ('{"authorization": "Token zzzzyyyyxxxx"}', "zzzzyyyyxxxx"),
        ("password=correct-horse-battery", "correct-horse-battery"),
        ('client_secret: "s3cr3t-value"', "s3cr3t-value"),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


def test_redaction_keeps_ordinary_text() -> None:
    text = 'The task: summarise "api design" notes; tokens=1200, max_tokens: 4096, skip-ant-hill, desk-123'
    assert redact(text) == text
    assert redact("") == ""


def test_redacted_pairs_keep_their_keys() -> None:
    assert redact('{"api_key": "hunter2hunter2"}') == '{"api_key": "[redacted]"}'
    assert redact("x-api-key: abcdefgh1234") == "x-api-key: [redacted]"
    assert redact("Authorization: Bearer abcdefgh1234") == "Authorization: [redacted]"
    assert redact("use Bearer abcdefgh1234 now") == "use Bearer [redacted] now"


def test_registered_secrets() -> None:
    register_secret("my-private-token-42")
    register_secret("")
    register_secret("redacted")  # inside the marker: could never be removed, ignored
    assert redact("a my-private-token-42 b my-private-token-42") == f"a {REDACTED} b {REDACTED}"


def test_short_secrets_are_redacted_where_they_stand_alone_and_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_team.telemetry"):
        register_secret("k9x2q")
        register_secret("ab1")
    assert redact("the code k9x2q, again k9x2q.") == f"the code {REDACTED}, again {REDACTED}."
    assert redact("xk9x2qy") == "xk9x2qy"  # inside a longer word it is not that secret
    assert redact("ab1 stays") == "ab1 stays"  # too short to tell from text: only warned about
    assert "short (5 characters)" in caplog.text and "only 3 character(s)" in caplog.text
    assert "k9x2q" not in caplog.text and "ab1" not in caplog.text


def test_longer_registered_secret_wins() -> None:
    register_secret("abcdefgh")
    register_secret("abcdefgh-longer-secret")
    assert redact("x abcdefgh-longer-secret y") == f"x {REDACTED} y"


@FAST
@given(st.text())
def test_redact_never_raises(text: str) -> None:
    assert isinstance(redact(text), str)


SECRET_ALPHABET = string.ascii_letters + string.digits + "-_"


@FAST
@given(
    prefix=st.text(),
    secret=st.text(alphabet=SECRET_ALPHABET, min_size=8, max_size=60),
    suffix=st.text(),
    repeat=st.integers(min_value=1, max_value=3),
)
def test_registered_secret_never_survives(prefix: str, secret: str, suffix: str, repeat: int) -> None:
    assume(secret not in REDACTED)
    content.clear_secrets()
    register_secret(secret)
    text = prefix + (secret + suffix) * repeat
    assert secret not in redact(text)
    assert secret not in to_json({"k": [text, {"nested": text}]})
    assert secret not in json.dumps(redact_value({"a": [text, (text,)]}))


KEYS = ["api_key", "x-api-key", "apikey", "Authorization", "password", "access_token"]


@FAST
@given(
    prefix=st.text(),
    key=st.sampled_from(KEYS),
    sep=st.sampled_from(["=", ": ", ":", " = "]),
    quote=st.sampled_from(["", '"', "'"]),
    token=st.text(alphabet=string.ascii_letters + string.digits, min_size=12, max_size=40),
    suffix=st.text(),
)
def test_key_value_pairs_never_survive(prefix: str, key: str, sep: str, quote: str, token: str, suffix: str) -> None:
    assume(token not in prefix and token not in suffix)
    pair = f"{key}{sep}{quote}{token}{quote}"
    assert token not in redact(f"{prefix} {pair} {suffix}")


@FAST
@given(
    token=st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=20, max_size=80),
    prefix=st.text(),
)
def test_sk_keys_never_survive(token: str, prefix: str) -> None:
    for key in (f"sk-ant-api03-{token}", f"sk-{token}"):
        out = redact(f"{prefix} {key} tail")
        assert key not in out


# -- to_json -------------------------------------------------------------------------------------------


def test_to_json_truncates_inside_the_structure() -> None:
    value = {"messages": [{"role": "user", "content": "x" * 3000}], "items": list(range(100))}
    doc = json.loads(to_json(value, max_string=100, max_items=10))
    text = doc["messages"][0]["content"]
    assert text.startswith("x" * 100)
    assert text.endswith("…[+2900 chars]")
    assert doc["items"][:10] == list(range(10))
    assert doc["items"][10] == "…[+90 items]"
    assert len(doc["items"]) == 11


def test_to_json_caps_dict_keys_and_redacts() -> None:
    big = {f"k{i}": i for i in range(60)}
    doc = json.loads(to_json(big))
    assert len(doc) == 51
    assert doc["…"] == "[+10 keys]"
    doc = json.loads(to_json({"api_key": "plain-looking-value", "note": f"key {ANTHROPIC_KEY}"}))
    assert doc == {"api_key": REDACTED, "note": f"key {REDACTED}"}


def test_to_json_redacts_before_truncating() -> None:
    # A key cut in half by truncation would no longer match the pattern: redaction must run first.
    text = "a" * 90 + ANTHROPIC_KEY
    out = json.loads(to_json(text, max_string=100))
    assert "sk-ant" not in out
    assert out.startswith("a" * 90 + REDACTED[:10])


@dataclass
class _Point:
    x: int
    label: str


def test_to_json_odd_values() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    doc = json.loads(
        to_json(
            {
                "nan": math.nan,
                "inf": -math.inf,
                "bytes": b"\x00\x01",
                "tuple": (1, "a"),
                "set": {3, 1, 2},
                "cycle": cyclic,
                "point": _Point(1, "p"),
                1: "int key",
                "obj": object(),
                "surrogate": "bad \udcff char",
            }
        )
    )
    assert doc["nan"] == "nan"
    assert doc["inf"] == "-inf"
    assert doc["bytes"] == "<2 bytes>"
    assert doc["tuple"] == [1, "a"]
    assert doc["set"] == [1, 2, 3]
    assert doc["cycle"] == [1, "…[cycle]"]
    assert doc["point"] == {"x": 1, "label": "p"}
    assert doc["1"] == "int key"
    assert doc["obj"].startswith("<object object")
    assert doc["surrogate"].startswith("bad ")


def test_to_json_deep_nesting_is_cut() -> None:
    value: Any = "leaf"
    for _ in range(200):
        value = [value]
    doc = json.loads(to_json(value))
    depth = 0
    while isinstance(doc, list):
        doc, depth = doc[0], depth + 1
    assert doc == "…[too deep]" and 10 <= depth < 200  # cut well before the leaf, marked where it was cut


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary(max_size=20)
)
values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=8)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=10) | st.integers(), children, max_size=8)
    ),
    max_leaves=40,
)


@FAST
@given(value=values, max_string=st.integers(min_value=0, max_value=50), max_items=st.integers(min_value=0, max_value=6))
@pytest.mark.slow
def test_to_json_is_always_valid_json(value: Any, max_string: int, max_items: int) -> None:
    text = to_json(value, max_string=max_string, max_items=max_items)
    doc = json.loads(text)
    text.encode("utf-8")  # exportable over OTLP
    assert _within_limits(doc, max_string, max_items)


def _within_limits(doc: Any, max_string: int, max_items: int) -> bool:
    """Strings and containers respect the limits, up to the truncation marker itself."""
    if isinstance(doc, str):
        markers = ("[+", "…[", "<")  # a marker stands whole; a cut string carries one right at the cut
        if doc in ("inf", "-inf", "nan"):  # a non-finite float, spelled whole like a marker
            return True
        return len(doc) <= max_string or doc.startswith(markers) or doc[max_string:].startswith("…[+")
    if isinstance(doc, list):
        return len(doc) <= max_items + 1 and all(_within_limits(d, max_string, max_items) for d in doc)
    if isinstance(doc, dict):
        return len(doc) <= max_items + 1 and all(_within_limits(d, max_string, max_items) for d in doc.values())
    return True


@FAST
@given(st.lists(st.text(max_size=5), min_size=0, max_size=30), st.integers(min_value=0, max_value=10))
def test_to_json_list_cap(items: list[str], max_items: int) -> None:
    doc = json.loads(to_json(items, max_items=max_items))
    if len(items) > max_items:
        assert len(doc) == max_items + 1
        assert doc[-1] == f"…[+{len(items) - max_items} items]"
    else:
        assert len(doc) == len(items)


# -- redact_value ------------------------------------------------------------------------------------


def test_redact_value_recurses_and_keeps_types() -> None:
    register_secret("registered-secret-1")
    record = {
        "task": "use registered-secret-1 to log in",
        "headers": {"x-api-key": "opaque-value-1234", "accept": "json"},
        "history": [("user", f"my key is {ANTHROPIC_KEY}"), {"n": 3, "ok": True, "f": 1.5, "none": None}],
        "password": "",
    }
    out = redact_value(record)
    assert out["task"] == f"use {REDACTED} to log in"
    assert out["headers"] == {"x-api-key": REDACTED, "accept": "json"}
    assert out["history"][0] == ("user", f"my key is {REDACTED}")
    assert out["history"][1] == {"n": 3, "ok": True, "f": 1.5, "none": None}
    assert out["password"] == ""
    assert record["task"] == "use registered-secret-1 to log in"  # input untouched
    assert redact_value(42) == 42
    assert redact_value(None) is None
