"""Recording every model exchange of a run, for every role and branch, to a readable JSON lines file.

The file (`mcp-team run --record FILE`, `MCP_TEAM_RECORD_DIR` for a server) holds, one JSON object a line:
- a `header`: the format and its version, when, the models by role and by member (provider, name, base
  URL, price list: what prices a call), and what the caller says about the run (request, settings);
- an `exchange` per model call, in the order the calls finished: who asked (`member`), why (`phase`),
  the request's `hash`, the model that answered, the request, and what came back: the `response`, the
  `error` (kind, message, HTTP status) or `cancelled` (e.g. cut by the call timeout);
- a `result` line written by whoever ran the run (see `mcp_team.evals.recordings`), when it finished.

Every string is redacted (`telemetry.content.redact_value`) before it is written: registered secrets
(API keys, tokens) and well-known secret shapes never reach the file. The hash is of the redacted
request, so a reader can check it from the file alone, and `llm.replay` serves these exchanges back.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import anyio
from pydantic import BaseModel, ConfigDict, Field

from mcp_team.llm.call import SPECIALIST, SUPERVISOR, ModelSet
from mcp_team.llm.types import Model, ModelError, ModelRequest, ModelResponse
from mcp_team.llm.wrappers import WrapperModel, map_models
from mcp_team.telemetry.content import redact_value

FORMAT: Literal["mcp-team-recording"] = "mcp-team-recording"
VERSION = 1
READS = (1,)  # the versions `llm.replay` reads: a later one may mean something else by the same lines


class ModelIdentity(BaseModel):
    """What tells models apart in a recording: what they are called and how their calls are priced."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    provider: str
    name: str
    base_url: str | None = None
    price_provider: str | None = None
    # Its `tool_calls` setting when not `auto` (a replay reads text calls as the run did); left out when unset.
    tool_calls: str | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def of(cls, model: Model) -> ModelIdentity:
        url, prices = getattr(model, "base_url", None), getattr(model, "price_provider", None)
        mode = getattr(model, "tool_calls", None)
        return cls(
            provider=model.provider,
            name=model.name,
            base_url=str(url) if url else None,
            price_provider=str(prices) if prices else None,
            tool_calls=mode if mode in ("native", "text") else None,
        )

    def __str__(self) -> str:
        return f"{self.provider}:{self.name}"


class Header(BaseModel, defer_build=True):
    """The first line of a recording."""

    type: Literal["header"] = "header"
    format: Literal["mcp-team-recording"] = FORMAT
    version: int = VERSION
    created_at: datetime
    models: dict[str, ModelIdentity]  # by role: supervisor, specialist
    members: dict[str, ModelIdentity] = {}  # a specialist's own model, by its name
    run: dict[str, Any] = {}  # what the caller says about the run: request, mode, settings, team


class RecordedError(BaseModel, defer_build=True):
    kind: str
    message: str
    status: int | None = None


class Exchange(BaseModel, defer_build=True):
    """One model call and what came back."""

    type: Literal["exchange"] = "exchange"
    n: int  # the order in which the calls finished, from 1
    member: str
    phase: str
    hash: str
    model: str
    request: dict[str, Any]
    response: dict[str, Any] | None = None
    error: RecordedError | None = None
    cancelled: bool = False

    def label(self) -> str:
        return describe(self.member, self.phase)


def describe(member: str, phase: str) -> str:
    """`the researcher's request`, `the supervisor's act request`: who asked, and why."""
    who = member or "unnamed member"
    return f"the {who}'s request" if phase == "specialist" else f"the {who}'s {phase} request"


def request_json(request: ModelRequest) -> dict[str, Any]:
    """The request as it is written to a recording: JSON, every string redacted."""
    data: dict[str, Any] = redact_value(request.model_dump(mode="json"))
    for unset in ("temperature", "reply_schema"):  # left out, so recordings made before they existed still match
        if data.get(unset) is None:
            data.pop(unset, None)
    return data


def request_hash(data: dict[str, Any]) -> str:
    """The hash of a request as written (`request_json`): of its canonical JSON, sorted keys, no spaces."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


class Recorder:
    """Writes one recording. Lines are flushed as they are written, so a crash keeps what happened."""

    def __init__(self, path: Path | str, models: ModelSet, run: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._count = 0
        header = Header(
            created_at=datetime.now(UTC),
            models={role: ModelIdentity.of(models.for_role(role)) for role in (SUPERVISOR, SPECIALIST)},
            members={name: ModelIdentity.of(m) for name, m in models.members.items()},
            run=redact_value(run or {}),
        )
        self._write(header.model_dump(mode="json"))
        self.models = map_models(models, lambda model: RecordingModel(model, self))

    def exchange(
        self,
        model: Model,
        request: ModelRequest,
        *,
        response: ModelResponse | None = None,
        error: ModelError | None = None,
    ) -> None:
        """Write one finished call: its response, its error, or neither (it was cancelled)."""
        data = request_json(request)
        with self._lock:
            self._count += 1
            n = self._count
        line = Exchange(
            n=n,
            member=request.member,
            phase=request.phase,
            hash=request_hash(data),
            model=str(ModelIdentity.of(model)),
            request=data,
            response=redact_value(response.model_dump(mode="json")) if response is not None else None,
            error=RecordedError(kind=error.kind, message=error.message, status=error.status) if error else None,
            cancelled=response is None and error is None,
        )
        self._write(
            line.model_dump(mode="json", exclude_none=True, exclude={"cancelled"} if not line.cancelled else None)
        )

    def finish(self, result: dict[str, Any]) -> None:
        """Write the run's result (the last line)."""
        self._write({"type": "result", **redact_value(result)})

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _write(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, ensure_ascii=False) + "\n"
        with self._lock:
            if not self._file.closed:  # a call that ends after the run closed its recording is not written
                self._file.write(text)
                self._file.flush()


class RecordingModel(WrapperModel):
    """`wrapped`, with every call written to `recorder`."""

    def __init__(self, wrapped: Model, recorder: Recorder) -> None:
        super().__init__(wrapped)
        self.recorder = recorder

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            response = await self.wrapped.complete(request)
        except ModelError as exc:
            self.recorder.exchange(self.wrapped, request, error=exc)
            raise
        except anyio.get_cancelled_exc_class():
            self.recorder.exchange(self.wrapped, request)
            raise
        self.recorder.exchange(self.wrapped, request, response=response)
        return response
