"""What auth costs a served team: `.venv/bin/python benchmarks/auth.py` (part of `make bench`).

Three `mcp-team serve --http --ephemeral` processes on the offline model, side by side: auth off, the static
token (MCP_TEAM_HTTP_TOKEN), and OAuth (`--auth-issuer`: RS256 JWT access tokens checked against the issuer's
keys, the per-request scope check, the challenges). The issuer is a small HTTP server of this script's on
loopback (its metadata and JWK Set; a token is signed here with PyJWT), fetched once by the server, as any
issuer's keys are. Each server gets the same stateless 2026-07-28 requests, one after another over one keep-alive
connection: `tools/list` (no scope needed) and `resources/read team://runs` (needs runs:read). Measured: the
server process's CPU (user + system, from /proc) per request, in interleaved rounds, the median per set-up.

The floor to keep: OAuth adds at most 1 ms of CPU per request over auth off (issue 39). The exit status is 0
even when it is missed (the line says FAIL), as the other benchmarks do.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

HERE = Path(__file__).resolve().parent
MCP_TEAM = str(Path(sys.executable).parent / "mcp-team")
LIMIT_MS = 1.0
KID = "bench-key"


class Issuer:
    """An issuer on loopback: RFC 8414 metadata and a JWK Set of one RSA key; tokens signed with it here."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = {**RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True), "kid": KID, "use": "sig", "alg": "RS256"}
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                documents = {
                    "/.well-known/oauth-authorization-server": {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"},
                    "/jwks": {"keys": [jwk]},
                }
                body = json.dumps(documents.get(self.path, {})).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def token(self, resource: str, scope: str) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": resource, "sub": "alice", "client_id": "bench", "iat": now,
                  "exp": now + 3600, "scope": scope}  # fmt: skip
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"typ": "at+jwt", "kid": KID})


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Served:
    def __init__(
        self, name: str, args: list[str], env: dict[str, str], token: str | None, port: int | None = None
    ) -> None:
        self.name, self.port = name, port or free_port()
        self.proc = subprocess.Popen(
            [MCP_TEAM, "serve", "--http", "--ephemeral", "--port", str(self.port), *args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": "2026-07-28"}  # fmt: skip
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"
        self.http = httpx2.Client(verify=False, timeout=30)
        self.samples: list[float] = []
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.http.get(f"http://127.0.0.1:{self.port}/healthz").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name}: the server did not start: {self.proc.stderr.read().decode()}")  # type: ignore[union-attr]
            time.sleep(0.1)

    def call(self, method: str, params: dict[str, Any], name: str) -> None:
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        headers = {**self.headers, "mcp-method": method, **({"mcp-name": name} if name else {})}
        response = self.http.post(self.url, json=message, headers=headers)
        if response.status_code != 200 or '"error"' in response.text[:200]:
            raise RuntimeError(f"{self.name}: {method} answered {response.status_code}: {response.text[:300]}")

    def round(self, n: int) -> None:
        """`n` requests (half tools/list, half a read of team://runs); one sample of CPU per request."""
        before = cpu_seconds(self.proc.pid)
        for i in range(n):
            if i % 2:
                self.call("resources/read", {"uri": "team://runs"}, "team://runs")
            else:
                self.call("tools/list", {}, "")
        self.samples.append((cpu_seconds(self.proc.pid) - before) / n)

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        self.proc.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per round per server (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = parser.parse_args()
    issuer = Issuer()
    with tempfile.TemporaryDirectory() as home:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_TEAM_", "OTEL_"))}
        env = {**base, "XDG_STATE_HOME": home, "MCP_TEAM_MODEL": "offline"}
        port = free_port()  # the OAuth server's: its tokens name it in their audience
        token = issuer.token(f"http://127.0.0.1:{port}/mcp", "team:run runs:read")
        servers = [
            Served("auth off", [], env, None),
            Served("static token", [], {**env, "MCP_TEAM_HTTP_TOKEN": "bench-token"}, "bench-token"),
            Served("OAuth (JWT, RS256)", ["--auth-issuer", issuer.url], env, token, port),
        ]
        try:
            for s in servers:
                s.round(max(50, args.requests // 10))  # warm-up: imports, the issuer's keys, caches
                s.samples.clear()
            for _ in range(args.rounds):
                for s in servers:
                    s.round(args.requests)
        finally:
            for s in servers:
                s.stop()
            issuer.http.shutdown()
    print(f"auth CPU per request, server process, median of {args.rounds} rounds of {args.requests} requests "
          f"(Python {platform.python_version()}, PyJWT {jwt.__version__}):")  # fmt: skip
    off = statistics.median(servers[0].samples) * 1000
    for s in servers:
        median = statistics.median(s.samples) * 1000
        spread = f"{min(s.samples) * 1000:.3f}..{max(s.samples) * 1000:.3f}"
        print(f"  {s.name:>20}: {median:6.3f} ms ({spread})  +{median - off:6.3f} ms over auth off")
    added = statistics.median(servers[2].samples) * 1000 - off
    verdict = "ok" if added <= LIMIT_MS else "FAIL"
    print(f"OAuth adds {added:.3f} ms of CPU per request (floor to keep: <= {LIMIT_MS:g} ms): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
