"""`fetch_url`: read one web page as text, guarded against SSRF, oversized bodies and slow servers.

This module owns the URL fetching tool and its address policy:

* Only `http` and `https` URLs. Redirects are followed by hand (at most `MAX_REDIRECTS`), and every hop is
  checked again, so an allowed public page cannot bounce the fetch to an internal one.
* Unless the team file sets `allow_private` or lists the host in `allowed_hosts`, a host must resolve only to
  public addresses: loopback, private, link-local (cloud metadata), multicast, reserved, unspecified and
  other non-global addresses are refused, for IPv4 and IPv6 alike, including IPv4 embedded in IPv6
  (`::ffff:127.0.0.1`, 6to4, Teredo, NAT64). A host name is resolved with `anyio.getaddrinfo` and refused if
  ANY of its addresses is blocked.
* DNS rebinding: after the check, the request is sent to the checked IP itself (the URL's host is replaced
  by the IP; the `Host` header and the TLS SNI / certificate check keep the real name), so a second DNS
  answer cannot redirect the connection. Environment proxies are ignored for the same reason. Hosts that
  are exempt (`allow_private`, `allowed_hosts`) are not pinned: they are fetched by name.
* The whole fetch (resolution, redirects, body) runs under one time limit, and the body is streamed and
  cut at `max_bytes`.
* HTML is reduced to its visible text (specialists/html_text.py: script, style and similar elements dropped,
  whitespace collapsed); plain text and JSON are returned as they are; other content types are refused.
* A text longer than what the model sees of a result (`max_result_chars`) comes in parts, each ending with a
  note that gives the `start` (in characters of the text) of the next. Nothing is kept between calls: each part
  fetches the page again, so a page that changes in between may repeat or skip a little.
"""

from __future__ import annotations

import codecs
import functools
import ipaddress
import socket
import ssl
from collections.abc import Sequence
from email.message import Message
from typing import Any

import anyio
import httpx2

from mcp_team.specialists.html_text import html_to_text
from mcp_team.specialists.tools import MAX_RESULT_CHARS, Tool, ToolFailed

MAX_REDIRECTS = 5
MAX_URL_LENGTH = 2048
USER_AGENT = "mcp-team-fetch/0.1 (+https://modelcontextprotocol.io)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript", "application/x-ndjson"})
_PRIVATE_HINT = "private addresses are blocked unless the team file allows them"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_MAX_TITLE = 300  # characters: a title is repeated before every part, in the room the part's text needs

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def fetch_url_tool(
    *,
    allow_private: bool = False,
    allowed_hosts: Sequence[str] = (),
    max_bytes: int = 1_000_000,
    timeout: float = 15.0,
    max_result_chars: int = MAX_RESULT_CHARS,
) -> Tool:
    """The `fetch_url` tool: GET an http(s) URL and return its text, under the given address policy and limits.

    Only the first `max_bytes` bytes of a body are read; its text comes in parts that fit in `max_result_chars`
    characters with their notes, so what a model sees of the tool is never cut."""
    if max_bytes < 1 or max_result_chars < 1:
        raise ValueError("max_bytes and max_result_chars must be at least 1")
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    hosts = frozenset(_normalize_host(h) for h in allowed_hosts)
    fetcher = _Fetcher(allow_private, hosts, max_bytes, timeout, max_result_chars)
    return Tool(
        name="fetch_url",
        description=(
            "Fetch a web page (http or https) and return its text: HTML reduced to readable text, "
            f"plain text and JSON as they are. Only a page's first {max_bytes} bytes are read. A long text "
            "comes in parts, each ending with a note that gives the start of the next; each call fetches "
            "the page again."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Absolute http(s) URL, e.g. https://example.com/"},
                "start": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": max_bytes,  # the text of a body is never longer than the body
                    "description": "The character of the text to start at, as the note after the previous "
                    "part says (default 0).",
                },
            },
            "required": ["url"],
        },
        run=fetcher.run,
        read_only=True,
        max_result_chars=max_result_chars,
    )


class _Fetcher:
    def __init__(
        self, allow_private: bool, allowed_hosts: frozenset[str], max_bytes: int, timeout: float, max_result_chars: int
    ) -> None:
        self.allow_private = allow_private
        self.allowed_hosts = allowed_hosts
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_result_chars = max_result_chars

    async def run(self, args: dict[str, Any]) -> str:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolFailed('\'url\' must be a non-empty string, e.g. {"url": "https://example.com/"}')
        url = url.strip()
        if len(url) > MAX_URL_LENGTH:
            raise ToolFailed(f"refused: the URL is {len(url)} characters long; the limit is {MAX_URL_LENGTH}")
        start = args.get("start", 0)
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ToolFailed("'start' must be an integer of at least 0, as the note after the previous part says")
        try:
            with anyio.fail_after(self.timeout):
                return await self._fetch(url, start)
        except TimeoutError:
            raise ToolFailed(f"fetching {url} took longer than the {self.timeout:g} s time limit") from None

    async def _fetch(self, url: str, start: int) -> str:
        current = _parse_url(url)
        async with httpx2.AsyncClient(
            verify=await anyio.to_thread.run_sync(_trust_store),
            follow_redirects=False,
            trust_env=False,  # an environment proxy would resolve names itself and defeat the address check
            timeout=self.timeout,
            headers={"User-Agent": USER_AGENT, "Accept": "text/html, text/plain, application/json;q=0.9, */*;q=0.1"},
        ) as client:
            for hop in range(MAX_REDIRECTS + 1):
                response = await self._send(client, current)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        if hop == MAX_REDIRECTS:
                            raise ToolFailed(f"refused: {url} redirects more than {MAX_REDIRECTS} times")
                        try:
                            current = _parse_url(str(current.join(location)))
                        except httpx2.InvalidURL as exc:
                            raise ToolFailed(f"{current} redirects to an invalid URL {location!r}: {exc}") from None
                        continue
                    return await self._read(current, response, start)
                except httpx2.HTTPError as exc:  # the body broke off or could not be decoded
                    raise ToolFailed(f"could not read {current}: {_describe(exc)}") from None
                finally:
                    await response.aclose()
        raise AssertionError("unreachable")

    async def _send(self, client: httpx2.AsyncClient, url: httpx2.URL) -> httpx2.Response:
        """Check the URL's host and send the GET, to the checked address itself when the host was checked."""
        host = url.raw_host.decode("ascii")
        targets = await self._targets(url, host)
        error: Exception | None = None
        for target in targets:
            if target is None:
                request = client.build_request("GET", url)
            else:
                extensions = {"sni_hostname": host} if url.scheme == "https" else {}
                request = client.build_request(
                    "GET",
                    url.copy_with(host=str(target)),
                    headers={"Host": url.netloc.decode("ascii")},
                    extensions=extensions,
                )
            try:
                return await client.send(request, stream=True)
            except httpx2.ConnectError as exc:  # try the host's next address
                error = exc
            except httpx2.HTTPError as exc:
                raise ToolFailed(f"could not fetch {url}: {_describe(exc)}") from None
        raise ToolFailed(f"could not connect to {url}: {_describe(error)}")

    async def _targets(self, url: httpx2.URL, host: str) -> list[IPAddress | None]:
        """Where to connect: `[None]` (by name) for exempt hosts, else every resolved address, all checked."""
        if self.allow_private or _normalize_host(host) in self.allowed_hosts:
            return [None]
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            _check_address(host, literal)
            return [literal]
        port = url.port or _DEFAULT_PORTS[url.scheme]
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ToolFailed(f"could not resolve {host}: {exc}") from None
        addresses: list[IPAddress | None] = []
        for *_, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            _check_address(host, address)
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise ToolFailed(f"could not resolve {host}: no addresses")
        return addresses

    async def _read(self, url: httpx2.URL, response: httpx2.Response, start: int) -> str:
        if response.status_code >= 400:
            raise ToolFailed(f"{url} answered HTTP {response.status_code} {response.reason_phrase}".rstrip())
        media_type, charset = _content_type(response.headers.get("content-type", ""))
        if media_type and not _is_readable(media_type):
            raise ToolFailed(
                f"refused: {url} is {media_type}; fetch_url reads only HTML, plain text and JSON, not other content"
            )
        body, truncated = await _read_limited(response, self.max_bytes)
        if not media_type:
            sniffed = _sniff(body)
            if sniffed is None:
                raise ToolFailed(f"refused: {url} sent no content type and its body is not text")
            media_type = sniffed
        text = body.decode(_codec(charset), errors="replace")
        head = f"URL: {url}\n"
        if media_type in _HTML_TYPES:
            title, text = html_to_text(text)
            if title:
                head += f"Title: {title if len(title) <= _MAX_TITLE else title[: _MAX_TITLE - 1] + '…'}\n"
        head += "\n"
        return head + self._part(url, text, start, truncated, self.max_result_chars - len(head))

    def _part(self, url: httpx2.URL, text: str, start: int, truncated: bool, room: int) -> str:
        """The part of `text` from `start` that fits in `room` characters with what follows it: where it lies and
        how to go on."""
        total = len(text)
        if start and start >= total:
            raise ToolFailed(
                f"start={start} is past the end of the text of {url} ({total} characters): there is no more"
            )
        cut = f"the body is larger than {self.max_bytes} bytes; only that much was read" if truncated else ""
        # Room for the note, with the longest numbers it can hold, so that the loop never cuts it off.
        room -= max(len(_part_note(total, total, total, more=more, cut=cut)) for more in (True, False))
        end = min(total, start + max(1, room))
        if end < total:
            return text[start:end] + _part_note(start, end, total, more=True, cut=cut)
        if start:
            return text[start:] + _part_note(start, end, total, more=False, cut=cut)
        return text + (f"\n\n[truncated: {cut}]" if cut else "")


@functools.cache
def _trust_store() -> ssl.SSLContext:
    """The system's certificates, loaded once (in a thread: it blocks). A client given none loads them itself,
    0.06-0.17 s of CPU on the event loop for every fetch, stalling every run the server has going."""
    return httpx2.create_ssl_context(trust_env=False)  # as the client's own: trust_env=False, see `_fetch`


def _parse_url(url: str) -> httpx2.URL:
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL as exc:
        raise ToolFailed(f"refused: {url!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in _DEFAULT_PORTS:
        scheme = f"the {parsed.scheme}:// scheme" if parsed.scheme else "a URL without a scheme"
        raise ToolFailed(f"refused: {url} uses {scheme}; only http:// and https:// URLs are fetched")
    if not parsed.raw_host:
        raise ToolFailed(f"refused: {url} has no host")
    return parsed


def _normalize_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _check_address(host: str, address: IPAddress) -> None:
    reason = blocked_reason(address)
    if reason is not None:
        shown = str(address) if host == str(address) else f"{host} ({address})"
        raise ToolFailed(f"refused: {shown} is {reason}; {_PRIVATE_HINT}")


def blocked_reason(address: IPAddress) -> str | None:
    """Why `address` must not be fetched (e.g. 'a loopback address'), or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        for label, embedded in _embedded_ipv4(address):
            inner = blocked_reason(embedded)
            if inner is not None:
                return f"{label} of {embedded}, which is {inner}"
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo client, NAT64), with their names."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if address.ipv4_mapped is not None:
        found.append(("an IPv4-mapped address", address.ipv4_mapped))
    if address.sixtofour is not None:
        found.append(("a 6to4 address", address.sixtofour))
    if address.teredo is not None:
        found.append(("a Teredo address", address.teredo[1]))
    if address in _NAT64:
        found.append(("a NAT64 address", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)))
    return found


def _content_type(header: str) -> tuple[str, str | None]:
    if not header:
        return "", None
    message = Message()
    message["content-type"] = header
    return message.get_content_type().lower(), message.get_content_charset()


def _is_readable(media_type: str) -> bool:
    return (
        media_type.startswith("text/")
        or media_type in _HTML_TYPES
        or media_type in _TEXT_TYPES
        or media_type.endswith(("+json", "+xml"))
    )


def _sniff(body: bytes) -> str | None:
    head = body[:512].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "text/html"
    if b"\x00" in body[:4096]:
        return None
    try:
        body[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 4090:  # a character cut at the sample's end is fine
            return None
    return "text/plain"


def _codec(charset: str | None) -> str:
    if charset:
        try:
            return codecs.lookup(charset).name
        except LookupError:
            pass
    return "utf-8"


async def _read_limited(response: httpx2.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most `max_bytes` of the (decoded) body; True when there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _part_note(start: int, end: int, total: int, *, more: bool, cut: str) -> str:
    """What follows a part of a page's text: where it lies, and how to read the next one, or that it is the last."""
    where = f"\n\n[part: characters {start}-{end} of {total} of the page's text"
    if more:
        return f"{where}; call fetch_url again with the same url and start={end} for the rest]"
    return f"{where}: the end{'; ' + cut if cut else ''}]"


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no address to connect to"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
