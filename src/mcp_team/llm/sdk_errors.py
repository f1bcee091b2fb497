"""A `ModelError` a person can act on, from an exception of the anthropic or the openai SDK.

Both SDKs are generated alike: the same exception classes (an HTTP status, a timeout, a connection
failure, a reply that cannot be read) and the same retry counter on each request, so the wording is
written once here. Each backend handles what only its provider says (a hint, a special status) first.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

from mcp_team.llm.types import ErrorKind


def describe(
    err: Exception,
    sdk: ModuleType,
    *,
    model: str,
    where: str,
    timeout: float,
    max_retries: int,
    key_variable: str,
    url_variable: str,
    detail: str = "",
    hint: str = "",
) -> tuple[ErrorKind, int | None, str]:
    """`(kind, HTTP status, message)` for an exception `sdk` raised after its own retries.

    `where` names the endpoint (`the OpenAI API`, `the server at <url>`), `detail` is the API's own
    account of a status error, `hint` ends the message of a request the API rejected; `key_variable` and
    `url_variable` say where the key and the base URL are set (a variable, a team file's entry).
    """
    if isinstance(err, sdk.APIStatusError):
        status: int = err.status_code
        tries = attempts(err.response.request.headers, max_retries)
        if status == 429:
            return (
                "rate_limited",
                status,
                f"{where} rate-limited the {model} call (HTTP 429){detail}; gave up after {tries}; "
                "lower the concurrency or wait and try again",
            )
        if status in (503, 529):
            return (
                "overloaded",
                status,
                f"{where} is overloaded (HTTP {status}){detail}; the {model} call gave up after {tries}; "
                "try again later",
            )
        if status >= 500:
            return (
                "server_error",
                status,
                f"{where} failed the {model} call with HTTP {status}{detail}; gave up after {tries}; try again later",
            )
        if status in (401, 403):
            what = f"rejected the API key of the {model} call" if status == 401 else f"denied the key access to {model}"
            return ("auth", status, f"{where} {what} (HTTP {status}){detail}; check {key_variable}")
        if status == 408:
            return ("timeout", status, f"{where} timed out the {model} call (HTTP 408){detail}; gave up after {tries}")
        return ("bad_request", status, f"{where} rejected the {model} request (HTTP {status}){detail}{hint}")
    if isinstance(err, sdk.APITimeoutError):
        tries = attempts(err.request.headers, max_retries)
        return ("timeout", None, f"the {model} call timed out ({timeout:g} s per attempt); gave up after {tries}")
    if isinstance(err, sdk.APIConnectionError):
        tries = attempts(err.request.headers, max_retries)
        said = str(err.__cause__ or "")
        # httpx says "All connection attempts failed" (of one attempt's addresses): the attempts are said once, below.
        cause = f": {type(err.__cause__).__name__}" if err.__cause__ else ""
        cause += f": {said}" if said and "connection attempts failed" not in said.lower() else ""
        return (
            "connection",
            None,
            f"could not reach {where}{cause}; gave up after {tries}; check the network, that the server is "
            f"running, and the base URL ({url_variable})",
        )
    if isinstance(err, sdk.APIResponseValidationError):
        return (
            "server_error",
            err.status_code,
            f"{where} returned a reply to the {model} call that could not be read: {err}",
        )
    return ("unavailable", None, f"the {model} call failed: {type(err).__name__}: {err}")


def unreadable(where: str, model: str, why: str, hint: str) -> str:
    """The message for a 200 reply that is not the API's: most often a base URL that points at some other server
    or page (the backend gives the `hint` on its base URL). Its kind is `server_error`: retried, and a fallback
    model may answer instead."""
    return f"{where} returned a reply to the {model} call that could not be read ({why}){hint}"


_HTML = re.compile(r"\s*(<!doctype html|<html|<head|<body)", re.I)
_HEADING = re.compile(r"<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>", re.I | re.S)


def quoted(text: str, width: int = 500) -> str:
    """What a server sent, for a message: an HTML page (a proxy's or web server's error page, not the API's
    answer) by its title or else its text, anything else cut to `width` characters."""
    if not _HTML.match(text):
        return clip(text, width)
    heading = _HEADING.search(text)
    if heading:
        return f"an HTML page titled {_text(next(g for g in heading.groups() if g is not None))!r}{_NOT_THE_API}"
    body = _text(re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.I | re.S))
    return f"an HTML page{f' saying {body!r}' if body else ''}{_NOT_THE_API}"


_NOT_THE_API = " (a proxy or web server answered, not the API)"


def _text(html: str) -> str:
    """The text of an HTML fragment, on one line, cut to 100 characters."""
    return clip(" ".join(re.sub(r"<[^>]+>", " ", html).split()), 100)


def clip(text: str, width: int = 300) -> str:
    """`text` cut to `width` characters, for quoting what a server sent in a message."""
    return text if len(text) <= width else text[:width] + "…"


def attempts(request_headers: Any, max_retries: int) -> str:
    """`3 attempts` / `1 attempt`: how many the SDK made, from the retry count it stamps on each request."""
    try:
        n = int(request_headers.get("x-stainless-retry-count")) + 1
    except (TypeError, ValueError):
        n = max_retries + 1
    return f"{n} attempt" if n == 1 else f"{n} attempts"


# A key this long is masked wherever it appears; a shorter one (a local server's placeholder key, `ollama`, `x`)
# only where it stands alone: masked inside words it would turn "check the network" into "chec[redacted] the ...".
_WHOLE_SECRET_LEN = 8


def scrub(text: str, *secrets: str | None) -> str:
    """`text` with every secret (should an API ever echo one back) masked."""
    for secret in secrets:
        if not secret:
            continue
        if len(secret) >= _WHOLE_SECRET_LEN:
            text = text.replace(secret, "[redacted]")
        else:
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(secret)}(?![A-Za-z0-9_])", "[redacted]", text)
    return text
