"""The issuer's signing keys (its JWK Set), fetched once and kept, fetched again when they are old or when a
token names a key id the set does not have (the issuer rotated its keys).

Written here, not PyJWT's `PyJWKClient`: that client fetches with blocking urllib (each check of a token would
need a worker thread, in case it fetches) and refuses a key id it does not know for 30 s after any fetch
(`cooldown_duration`), so tokens signed with a newly rotated key were refused for up to 30 s. Here fetches are
async, one at a time (requests that arrive meanwhile wait for that fetch), and the fetches an unknown key id
may cause are limited to `refreshes_per_minute` (a leaky bucket, as jwks-rsa's default of 10 a minute): a
flood of tokens with made-up key ids costs the issuer at most that many requests. Parsing and verifying keys
is PyJWT's (`PyJWKSet`); nothing here is cryptography.

When a fetch fails, the keys fetched before are kept (an issuer briefly down does not lock everyone out) and
the next attempt waits `RETRY_SECONDS`; with no keys at all, tokens are refused until a fetch succeeds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from aiolimiter import AsyncLimiter
from jwt import PyJWK, PyJWKSet, PyJWTError

from mcp_team.server.oauth.metadata import DiscoveryError

log = logging.getLogger("mcp_team.server.oauth")

RETRY_SECONDS = 5.0  # after a failed fetch, the next one waits this long


class KeyProblem(Exception):
    """No key to check a token with: unknown key id, or the keys could not be fetched (the message says)."""


class JwksCache:
    """Signing keys by key id, from `fetch` (which returns the JWK Set document)."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[Mapping[str, Any]]],
        *,
        max_age: float,
        refreshes_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max_age = max_age
        self._clock = clock
        self._keys: dict[str | None, PyJWK] | None = None
        self._fetched_at = 0.0
        self._retry_at = 0.0
        self._generation = 0  # fetches done: a request that waited for one does not fetch again
        self._lock = anyio.Lock()
        self._unknown_kid = AsyncLimiter(refreshes_per_minute, 60)
        self._last_error = "not fetched yet"
        self.fetches = 0  # for `check` and the tests

    async def key(self, kid: str | None) -> PyJWK:
        """The key `kid` names (a token without `kid`: the only key), or `KeyProblem`."""
        now = self._clock()
        if (self._keys is None or now - self._fetched_at >= self._max_age) and now >= self._retry_at:
            await self._refresh(self._generation)
        found = self._pick(kid)
        if found is None and kid is not None and self._keys is not None and self._unknown_kid.has_capacity():
            seen = self._generation
            await self._unknown_kid.acquire()  # never waits: there was capacity
            await self._refresh(seen)
            found = self._pick(kid)
        if found is not None:
            return found
        if self._keys is None:
            raise KeyProblem(f"the issuer's signing keys are unavailable ({self._last_error})")
        known = ", ".join(k for k in self._keys if k is not None) or "none with a key id"
        raise KeyProblem(f"no key {kid!r} among the issuer's signing keys ({known})")

    def _pick(self, kid: str | None) -> PyJWK | None:
        if self._keys is None:
            return None
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self, seen: int) -> None:
        async with self._lock:
            if self._generation != seen or self._clock() < self._retry_at:  # fetched, or failed, meanwhile
                return
            try:
                document = await self._fetch()
                keys = PyJWKSet.from_dict(dict(document))
            except (DiscoveryError, PyJWTError) as exc:
                self._last_error = str(exc)
                self._retry_at = self._clock() + RETRY_SECONDS
                if self._keys is None:
                    log.warning("cannot check tokens: %s", exc)
                else:
                    log.warning("the issuer's signing keys could not be fetched again (%s); the keys "
                                "fetched before are used meanwhile", exc)  # fmt: skip
                return
            finally:
                self.fetches += 1
            signing = {k.key_id: k for k in keys if k.public_key_use in (None, "sig")}
            if not signing:
                self._last_error = "the issuer's JWK Set has no signing key"
                self._retry_at = self._clock() + RETRY_SECONDS
                return
            self._keys = signing
            self._fetched_at = self._clock()
            self._generation += 1
