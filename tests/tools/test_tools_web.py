"""`fetch_url`: SSRF refusals (addresses, schemes, redirect hops, DNS answers), text extraction and limits, and a
long page read whole in parts.

A local `ThreadingHTTPServer` on 127.0.0.1 stands in for the web; reaching it needs `allow_private` or an
`allowed_hosts` entry, which is itself what the refusal tests check.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from mcp_team.specialists import ToolFailed, web
from mcp_team.specialists.html_text import html_to_text
from mcp_team.specialists.web import MAX_REDIRECTS, blocked_reason, fetch_url_tool
from support.local_http import LocalHTTPServer

PAGE = """<!doctype html>
<html><head><title>The  Test
 Page</title><style>body { color: red }</style>
<script>var secret = "do not show";</script></head>
<body><h1>Heading</h1><p>First   paragraph
with <b>bold</b> text.</p><noscript>enable js</noscript>
<ul><li>one</li><li>two</li></ul><script type="module">alert("x")</script><p>Last&nbsp;line &amp; more</p>
</body></html>"""
BIG = b"x" * 50_000
BEES = "🐝 bees dance é\n" * 400  # 6,000 characters, 7,600 bytes of UTF-8
BEES_PAGE = f"<html><head><title>{'T' * 1000}</title></head><body><p>{'</p><p>'.join(BEES.splitlines())}</p></body>"
PART_NOTE = re.compile(r"\n\n\[part: characters (\d+)-(\d+) of (\d+) of the page's text[^\n]*\]\Z")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, body: bytes, content_type: str | None, status: int = 200, **headers: str) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        match url.path:
            case "/page":
                self.reply(PAGE.encode(), "text/html; charset=utf-8")
            case "/text":
                self.reply("plain text, ünïcode".encode(), "text/plain; charset=utf-8")
            case "/latin1":
                self.reply("café".encode("latin-1"), "text/plain; charset=iso-8859-1")
            case "/json":
                self.reply(json.dumps({"a": [1, 2]}).encode(), "application/json")
            case "/untyped":
                self.reply(b"no type here", None)
            case "/big":
                self.reply(BIG, "text/plain")
            case "/bees":
                self.reply(BEES.encode(), "text/plain; charset=utf-8")
            case "/bees.html":
                self.reply(BEES_PAGE.encode(), "text/html; charset=utf-8")
            case "/image":
                self.reply(b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
            case "/missing":
                self.reply(b"not here", "text/plain", status=404)
            case "/host":
                self.reply(f"Host: {self.headers['Host']}".encode(), "text/plain")
            case "/redirect":
                self.reply(b"", "text/plain", status=302, Location=query["to"])
            case "/loop":
                self.reply(b"", "text/plain", status=301, Location="/loop")
            case "/slow":
                time.sleep(2)
                self.reply(b"late", "text/plain")
            case _:
                self.reply(b"?", "text/plain", status=404)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with LocalHTTPServer(Handler, "fake-web") as server:
        yield server.url


@pytest.fixture
def port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def fetch(url: str, **config: Any) -> str:
    return await fetch_url_tool(**config).run({"url": url})


async def refused(url: str, **config: Any) -> str:
    with pytest.raises(ToolFailed) as info:
        await fetch(url, **config)
    return str(info.value)


pytestmark = pytest.mark.anyio


# --- refusals by default ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/text", "127.0.0.1 is a loopback address"),
        ("http://localhost:{port}/text", "loopback address"),
        ("http://[::1]:{port}/text", "::1 is a loopback address"),
        ("http://10.1.2.3/", "10.1.2.3 is a private address"),
        ("http://192.168.0.1/", "private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://[::ffff:127.0.0.1]:{port}/text", "IPv4-mapped address of 127.0.0.1, which is a loopback address"),
        ("http://[fe80::1]/", "link-local address"),
        ("http://0.0.0.0:{port}/", "unspecified address"),
        ("http://2130706433:{port}/text", "2130706433 (127.0.0.1) is a loopback address"),
        ("http://224.0.0.1/", "multicast address"),
    ],
)
async def test_private_addresses_are_refused_by_default(url: str, reason: str, port: int) -> None:
    message = await refused(url.format(port=port))

    assert message.startswith("refused: ")
    assert reason in message
    assert "private addresses are blocked unless the team file allows them" in message


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("file:///etc/passwd", "file://"), ("ftp://example.com/x", "ftp://"), ("gopher://example.com/", "gopher://")],
)
async def test_only_http_schemes(url: str, scheme: str) -> None:
    message = await refused(url, allow_private=True)

    assert message == f"refused: {url} uses the {scheme} scheme; only http:// and https:// URLs are fetched"


async def test_bad_arguments() -> None:
    tool = fetch_url_tool()
    for args in ({}, {"url": 5}, {"url": "  "}):
        with pytest.raises(ToolFailed, match="'url' must be a non-empty string"):
            await tool.run(args)
    assert "without a scheme" in await refused("example.com/page")
    assert "characters long" in await refused("https://example.com/" + "a" * 3000)


@pytest.mark.parametrize(
    ("address", "blocked"),
    [
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
        ("100.64.0.1", True),  # carrier-grade NAT: neither private nor global
        ("2002:7f00:1::", True),  # 6to4 of 127.0.0.1
        ("64:ff9b::a00:1", True),  # NAT64 of 10.0.0.1
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", True),  # Teredo of 127.0.0.1
        ("fd00:ec2::254", True),  # unique-local (AWS IPv6 metadata)
        ("::", True),
        ("ff02::1", True),
        ("240.0.0.1", True),
        ("192.0.2.1", True),  # documentation range
    ],
)
def test_blocked_reason(address: str, blocked: bool) -> None:
    assert (blocked_reason(ipaddress.ip_address(address)) is not None) == blocked


# --- fetching, with private addresses allowed --------------------------------------------------------------------


async def test_html_is_reduced_to_text(base: str) -> None:
    result = await fetch(f"{base}/page", allow_private=True)

    assert result.startswith(f"URL: {base}/page\nTitle: The Test Page\n\n")
    body = result.split("\n\n", 1)[1]
    assert body == "Heading\n\nFirst paragraph with bold text.\n\none\ntwo\n\nLast line & more"
    for hidden in ("secret", "color", "alert", "enable js", "<"):
        assert hidden not in result


def test_html_to_text_survives_unclosed_tags() -> None:
    title, text = html_to_text(
        "<title>T</title><p>a<p>b<div>c <svg><title>icon</title>x</svg> d<br>e<pre>  x = 1\n  y = 2</pre>"
    )

    assert (title, text) == ("T", "a\n\nb\n\nc d\ne\n\n  x = 1\n  y = 2")


async def test_text_json_and_charsets_are_returned_as_is(base: str) -> None:
    assert (await fetch(f"{base}/text", allow_private=True)).endswith("\n\nplain text, ünïcode")
    assert (await fetch(f"{base}/json", allow_private=True)).endswith('\n\n{"a": [1, 2]}')
    assert (await fetch(f"{base}/latin1", allow_private=True)).endswith("\n\ncafé")
    assert (await fetch(f"{base}/untyped", allow_private=True)).endswith("\n\nno type here")


async def test_other_content_types_are_refused(base: str) -> None:
    message = await refused(f"{base}/image", allow_private=True)

    assert message == (
        f"refused: {base}/image is image/png; fetch_url reads only HTML, plain text and JSON, not other content"
    )


async def test_http_errors_fail(base: str) -> None:
    assert await refused(f"{base}/missing", allow_private=True) == f"{base}/missing answered HTTP 404 Not Found"


async def test_body_is_cut_at_max_bytes(base: str) -> None:
    result = await fetch(f"{base}/big", allow_private=True, max_bytes=1000)

    text, note = result.split("\n\n", 1)[1].split("\n\n")
    assert text == "x" * 1000
    assert note == "[truncated: the body is larger than 1000 bytes; only that much was read]"
    assert "truncated" not in await fetch(f"{base}/big", allow_private=True, max_bytes=len(BIG))


async def read_in_parts(url: str, head: str, **config: Any) -> str:
    """The text of `url`, read from its start going where each part's note says, until a note says the end;
    every part must begin with `head` and fit in what the model sees."""
    tool = fetch_url_tool(allow_private=True, max_result_chars=1000, **config)
    results = [await tool.run({"url": url})]
    while "; call fetch_url again with the same url and start=" in results[-1]:
        start = int(results[-1].rsplit("start=", 1)[1].split()[0])
        results.append(await tool.run({"url": url, "start": start}))
        assert len(results) < 1000, "the notes lead in a circle"
    assert ": the end" in results[-1]
    assert all(result.startswith(head) and len(result) <= 1000 for result in results)
    ranges = [tuple(int(n) for n in PART_NOTE.search(result).groups()) for result in results]  # type: ignore[union-attr]
    assert [start for start, _, _ in ranges] == [0, *(end for _, end, _ in ranges[:-1])]
    return "".join(PART_NOTE.split(result[len(head) :])[0] for result in results)


async def test_a_long_text_is_read_whole_in_parts_each_fitting_what_the_model_sees(base: str) -> None:
    assert await read_in_parts(f"{base}/bees", f"URL: {base}/bees\n\n") == BEES

    title = "T" * 299 + "…"  # a title is shortened: it comes before every part
    text = await read_in_parts(f"{base}/bees.html", f"URL: {base}/bees.html\nTitle: {title}\n\n")
    assert text == html_to_text(BEES_PAGE)[1]


async def test_a_cut_body_is_read_in_parts_up_to_the_cut(base: str) -> None:
    text = await read_in_parts(f"{base}/bees", f"URL: {base}/bees\n\n", max_bytes=3000)

    assert text == BEES.encode()[:3000].decode(errors="replace")
    last = await fetch_url_tool(allow_private=True, max_bytes=3000).run({"url": f"{base}/bees", "start": 2000})
    assert last.endswith(
        f"\n\n[part: characters 2000-{len(text)} of {len(text)} of the page's text: the end; the body is larger "
        "than 3000 bytes; only that much was read]"
    )


async def test_a_start_past_the_end_or_wrong_is_refused(base: str) -> None:
    tool = fetch_url_tool(allow_private=True)
    with pytest.raises(ToolFailed) as info:
        await tool.run({"url": f"{base}/text", "start": 19})
    assert str(info.value) == f"start=19 is past the end of the text of {base}/text (19 characters): there is no more"
    for wrong in (-1, "3", True):
        with pytest.raises(ToolFailed, match="'start' must be an integer of at least 0"):
            await tool.run({"url": f"{base}/text", "start": wrong})
    assert tool.input_schema["properties"]["start"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 1_000_000,
        "description": "The character of the text to start at, as the note after the previous part says (default 0).",
    }


async def test_slow_server_hits_the_time_limit(base: str) -> None:
    message = await refused(f"{base}/slow", allow_private=True, timeout=0.3)

    assert message == f"fetching {base}/slow took longer than the 0.3 s time limit"


async def test_connection_refused_fails_clearly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    message = await refused(f"http://127.0.0.1:{free}/", allow_private=True)

    assert message.startswith(f"could not connect to http://127.0.0.1:{free}/: ConnectError")


# --- allowed hosts and redirects ---------------------------------------------------------------------------------


async def test_allowed_host_is_fetched_by_name(port: int) -> None:
    result = await fetch(f"http://localhost:{port}/host", allowed_hosts=["LOCALHOST."])

    assert result.endswith(f"Host: localhost:{port}")


async def test_redirect_hops_are_checked_again(port: int) -> None:
    target = f"http://127.0.0.1:{port}/text"
    url = f"http://localhost:{port}/redirect?to={target}"

    message = await refused(url, allowed_hosts=["localhost"])
    assert message == "refused: 127.0.0.1 is a loopback address; " + (
        "private addresses are blocked unless the team file allows them"
    )

    result = await fetch(url, allowed_hosts=["localhost", "127.0.0.1"])
    assert result == f"URL: {target}\n\nplain text, ünïcode"


async def test_relative_redirects_and_the_redirect_limit(base: str) -> None:
    assert (await fetch(f"{base}/redirect?to=/json", allow_private=True)).startswith(f"URL: {base}/json\n")
    assert await refused(f"{base}/loop", allow_private=True) == (
        f"refused: {base}/loop redirects more than {MAX_REDIRECTS} times"
    )
    assert "uses the file:// scheme" in await refused(f"{base}/redirect?to=file:///etc/passwd", allow_private=True)


# --- DNS: every answer is checked, and the connection goes to the checked address --------------------------------


def fake_dns(monkeypatch: pytest.MonkeyPatch, *answers: str) -> list[str]:
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
        asked.append(host)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers
        ]

    monkeypatch.setattr(web.anyio, "getaddrinfo", getaddrinfo)
    return asked


async def test_a_name_with_any_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = fake_dns(monkeypatch, "93.184.215.14", "10.0.0.7")

    message = await refused("https://mixed.example/page")

    assert asked == ["mixed.example"]
    assert message == (
        "refused: mixed.example (10.0.0.7) is a private address; "
        "private addresses are blocked unless the team file allows them"
    )


async def test_the_connection_goes_to_the_checked_address(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """No second DNS lookup can move the request: it is sent to the IP that passed, with the original Host."""
    checked: list[str] = []
    asked = fake_dns(monkeypatch, "127.0.0.1")

    def allow_all(address: Any) -> None:
        checked.append(str(address))

    monkeypatch.setattr(web, "blocked_reason", allow_all)

    result = await fetch(f"http://rebind.example:{port}/host")

    assert (asked, checked) == (["rebind.example"], ["127.0.0.1"])
    assert result == f"URL: http://rebind.example:{port}/host\n\nHost: rebind.example:{port}"


async def test_unresolvable_host_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(web.anyio, "getaddrinfo", getaddrinfo)

    assert await refused("https://nowhere.example/") == (
        "could not resolve nowhere.example: [Errno -2] Name or service not known"
    )


def tls_server(tmp_path: Path, seen: list[str | None]) -> tuple[socket.socket, threading.Thread]:
    """A TLS listener on 127.0.0.1 with a self-signed certificate that records the SNI of one handshake."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pinned.example")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("pinned.example")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    context.sni_callback = lambda sock, server_name, ctx: seen.append(server_name)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_one() -> None:
        connection, _ = listener.accept()
        with connection, contextlib.suppress(OSError):
            context.wrap_socket(connection, server_side=True).close()

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    return listener, thread


async def test_https_is_pinned_with_the_real_name_for_sni_and_certificates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The TLS connection goes to the checked IP, but SNI and the certificate check use the URL's host name."""
    seen: list[str | None] = []
    listener, thread = tls_server(tmp_path, seen)
    fake_dns(monkeypatch, "127.0.0.1")
    monkeypatch.setattr(web, "blocked_reason", lambda address: None)
    port = listener.getsockname()[1]

    with listener:
        message = await refused(f"https://pinned.example:{port}/")
        thread.join(5)

    assert seen == ["pinned.example"]
    assert message.startswith(f"could not connect to https://pinned.example:{port}/: ConnectError")
    assert "CERTIFICATE_VERIFY_FAILED" in message  # self-signed: verified (and refused) like any other certificate


async def test_the_trust_store_is_loaded_once_not_at_every_fetch(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the system's certificates costs 0.06-0.17 s of CPU on the event loop; a client given no TLS
    context loads them again each time, and `fetch_url` makes a client per fetch."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args)
        load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    web._trust_store.cache_clear()
    for tool in (fetch_url_tool(allow_private=True), fetch_url_tool(allow_private=True)):
        for _ in range(2):
            assert (await tool.run({"url": f"{base}/text"})).endswith("plain text, ünïcode")
    assert len(loads) == 1, loads
