"""What the two API backends (llm/anthropic.py, llm/openai.py) share: a model behind a provider's SDK.

Both keep the same settings (model name, key, endpoint, retries, timeout, price list, where the key and the
base URL were set), make their SDK client on the first call and close it, and turn what the SDK raises into a
`ModelError` a person can act on, with the key masked should an API echo it back. The wording of those errors
is llm/sdk_errors.py's; this class gives it each model's own facts. A backend adds what only its provider does:
its client, its request and reply, and the errors only it has (`_describe`, then `_described` for the rest).

Imports no SDK: each backend passes its own module as `sdk`.
"""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import ClassVar, Generic, Protocol, TypeVar

from mcp_team.llm.sdk_errors import describe, scrub, unreadable
from mcp_team.llm.types import ErrorKind, ModelError


class _Client(Protocol):
    """What this class uses of an SDK's async client (`AsyncAnthropic`, `AsyncOpenAI`)."""

    @property
    def api_key(self) -> str | None: ...

    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


class SdkModel(Generic[ClientT]):
    """A model behind a provider's SDK: its settings, its client's life, and its errors.

    `api_key` None: the SDK's own lookup; `base_url` None: the provider's own API (each backend says what
    else). `key_setting` and `url_setting` name where the key and the base URL were set (a variable, a team
    file's entry), for the errors that say what to check.
    """

    provider: ClassVar[str]
    sdk: ModuleType  # the SDK module, whose exception classes `describe` reads (a class attribute)
    api_shape: ClassVar[str]  # the API a base URL should point at, for the hint of a reply that is not its
    placeholder_key: ClassVar[str | None] = None  # a stand-in key sent where none is needed: no secret to mask

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float,
        price_provider: str | None,
        key_setting: str,
        url_setting: str,
    ) -> None:
        self.name = model
        self.max_retries = max_retries
        #: Seconds per attempt.
        self.timeout = timeout
        self.key_setting, self.url_setting = key_setting, url_setting
        self._api_key = api_key
        #: The endpoint's URL (for per-endpoint limits and prices, and messages); None for the provider's own API.
        self.base_url = base_url
        #: The genai-prices provider its calls are priced with (see `llm.cost`); None: by the endpoint, if known.
        self.price_provider = price_provider
        self._client: ClientT | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None  # the event loop `_client` was made in

    @property
    def where(self) -> str:
        """The endpoint in words, for messages (`the OpenAI API`, `the server at <url>`)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the SDK client's connections, if it was ever created."""
        if (client := self._client_of_this_loop()) is not None:
            await client.close()
        self._client = None

    def _client_of_this_loop(self) -> ClientT | None:
        """The client, unless it was made in another event loop: then it is dropped, and the next call makes its
        own. Its connections belong to that loop (most often closed: a script's second `asyncio.run`, or `run`
        after `anyio.run` asked the server its models), and using or closing them there failed, "Event loop is
        closed". Dropped, not closed: the garbage collector closes their sockets (the backends give the SDK a
        plain httpx client, whose finalizer schedules nothing on the loop running then)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._client is not None and self._client_loop is not loop:
            self._client = None
        self._client_loop = loop
        return self._client

    # -- errors ------------------------------------------------------------------------------------

    def _unreadable(self, why: str) -> ModelError:
        """The error for a 200 reply that is not the API's (most often a base URL that points elsewhere)."""
        hint = f"; check the base URL ({self.url_setting}): it should be {self.api_shape}" if self.base_url else ""
        return ModelError("server_error", self._scrub(unreadable(self.where, self.name, why, hint)))

    def _model_error(self, err: Exception) -> ModelError:
        """The `ModelError` for an SDK exception raised after the SDK's own retries."""
        kind, status, message = self._describe(err)
        return ModelError(kind, self._scrub(message), status=status)

    def _describe(self, err: Exception) -> tuple[ErrorKind, int | None, str]:
        """`(kind, HTTP status, message)` for `err`; a backend handles what only its provider says first."""
        return self._described(err)

    def _described(self, err: Exception, detail: str = "", hint: str = "") -> tuple[ErrorKind, int | None, str]:
        """`describe` with this model's facts: `detail` is the API's own account, `hint` ends a rejection."""
        return describe(
            err,
            self.sdk,
            model=self.name,
            where=self.where,
            timeout=self.timeout,
            max_retries=self.max_retries,
            key_variable=self.key_setting,
            url_variable=self.url_setting,
            detail=detail,
            hint=hint,
        )

    def _scrub(self, text: str) -> str:
        """`text` with the API key (should it ever be echoed back) masked: the one given, and the one the SDK
        found itself."""
        sent = self._client.api_key if self._client is not None else None
        return scrub(text, self._api_key, sent if sent != self.placeholder_key else None)
