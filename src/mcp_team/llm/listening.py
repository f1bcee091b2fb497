"""Whether anything listens at a model server on this machine, asked once before its first call.

A local server that is not running (Ollama not started, llama.cpp on another port) refuses the connection at
once. The SDK retries a failed connection as it retries any (four times, with backoff), and the supervisor's
call is retried on top of that: a run failed after 15 attempts and some 20 seconds. One TCP connect to the
server's port says the same in milliseconds, and the error names the URL. Only for a loopback host reached
without a proxy: elsewhere a direct connect may not be how the SDK connects.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
import urllib.request

import anyio

from mcp_team.llm.types import ModelError

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_ASK_FOR = 5.0  # seconds a connect to this machine may take: it answers at once, unless it is stuck


async def raise_if_not_listening(url: str, url_setting: str) -> None:
    """`ModelError` (`connection`: a fallback model may answer instead) at once when `url` is on this machine and
    nothing listens there; `url_setting` names where the URL was set, for the fix."""
    if (address := local_address(url)) is not None and await refused(*address):
        raise ModelError(
            "connection",
            f"nothing is listening at {url} (connection refused): start the model server there, or correct the base "
            f"URL ({url_setting})",
        )


def local_address(url: str) -> tuple[str, int] | None:
    """`(host, port)` of `url` when it is on this machine (a loopback host) and reached without a proxy; else None."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname
    if host is None or parts.scheme not in ("http", "https"):
        return None
    if host.lower() not in _LOOPBACK_NAMES:
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return None
        except ValueError:  # a name: not this machine's, as far as we can tell without resolving it
            return None
    if urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(host):
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port out of range: the SDK's call says it
        return None
    return host, port


async def refused(host: str, port: int) -> bool:
    """Whether every address of `host` refused a connection to `port`: nothing listens there. Anything else (it
    connected, a timeout, an unreachable network) is False: the call itself finds out and says it."""
    try:
        with anyio.fail_after(_ASK_FOR):
            stream = await anyio.connect_tcp(host, port)
    except OSError as exc:
        return _all_refused(exc)
    except TimeoutError:
        return False
    await stream.aclose()
    return False


def _all_refused(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionRefusedError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_all_refused(e) for e in exc.exceptions)
    cause = exc.__cause__  # anyio's "All connection attempts failed" carries the attempts' errors as its cause
    return cause is not None and _all_refused(cause)
