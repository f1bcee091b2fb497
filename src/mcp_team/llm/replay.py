"""Replaying a recording (`--model replay:FILE`): the run again, with no model at all.

Each request is looked up by its hash (see `llm.recording`), not by its place in the file, so parallel
branches get their answers whatever order they ask in; identical requests get their recorded answers
in the recorded order. Errors and cancellations are served as they happened: a recorded error is raised
again, a call that was cancelled (e.g. by the call timeout) never answers, so the same thing cuts it.

A request the recording does not have stops the run with `Divergence`: which call, who asked and why,
and what changed against the closest recorded request, as a readable diff. Never a wrong answer.

The replayed models carry the recorded identities (provider, name, base URL, price list), so the
engine names and prices their calls as it did when they were recorded.
"""

from __future__ import annotations

import difflib
import json
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from mcp_team.errors import ConfigError, McpTeamError, message_of
from mcp_team.llm.call import SPECIALIST, SUPERVISOR, ModelSet
from mcp_team.llm.recording import READS, Exchange, Header, ModelIdentity, describe, request_hash, request_json
from mcp_team.llm.types import ModelError, ModelRequest, ModelResponse


class Divergence(McpTeamError):
    """The run asked for something the recording does not have. Not a `ModelError`: nothing retries it."""

    def __init__(self, message: str, *, member: str, phase: str, call: int) -> None:
        super().__init__(message)
        self.member, self.phase, self.call = member, phase, call


class Recording:
    """A recording file, read and checked."""

    def __init__(self, path: Path, header: Header, exchanges: list[Exchange], result: dict[str, Any] | None):
        self.path, self.header, self.exchanges, self.result = path, header, exchanges, result

    @classmethod
    def load(cls, path: Path | str) -> Recording:
        """Read a recording. Raises `ConfigError` naming the file and the line that is wrong."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such recording (make one with mcp-team run --record {path} ...)") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the recording: {exc.strerror or exc}") from None
        header: Header | None = None
        exchanges: list[Exchange] = []
        result = None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                kind = data.get("type") if isinstance(data, dict) else None
                if number == 1 or header is None:
                    if kind != "header":
                        raise ValueError("the first line is not a recording header: is this an mcp-team recording?")
                    _check_version(path, data.get("version"))
                    header = Header.model_validate(data)
                elif kind == "exchange":
                    exchanges.append(Exchange.model_validate(data))
                elif kind == "result":
                    result = data
                else:
                    raise ValueError(f"unknown line type {kind!r}")
            except (ValueError, ValidationError) as exc:
                detail = _problems(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
                if isinstance(exc, json.JSONDecodeError):
                    detail = f"not JSON ({detail})" + ("; is this an mcp-team recording?" if header is None else "")
                raise ConfigError(f"{path}, line {number}: not a valid recording line: {detail}") from None
        if header is None:
            raise ConfigError(f"{path}: the recording is empty")
        return cls(path, header, exchanges, result)


def _check_version(path: Path, version: object) -> None:
    """`ConfigError` for a recording of a version this code does not read: its lines may mean something else
    (a later version), and replaying it as if they did not would be a wrong answer, not a divergence."""
    if isinstance(version, int) and not isinstance(version, bool) and version not in READS:
        reads = ", ".join(map(str, READS))
        raise ConfigError(
            f"{path}: a recording of version {version}, and this mcp-team reads version {reads} only; replay it "
            f"with the mcp-team that wrote it, or record it again (mcp-team run --record {path} ...)"
        )


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {message_of(e)}" for e in exc.errors())


class Replay:
    """Serves one recording's exchanges, by request hash; shared by the replayed models of a run."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self._queues: dict[str, deque[Exchange]] = {}
        for exchange in recording.exchanges:
            self._queues.setdefault(exchange.hash, deque()).append(exchange)
        self.calls = 0
        self.divergence: Divergence | None = None  # the first one, when the run diverged

    def unused(self) -> list[Exchange]:
        """Recorded calls the run has not asked for (yet)."""
        return sorted((e for q in self._queues.values() for e in q), key=lambda e: e.n)

    async def serve(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        data = request_json(request)
        queue = self._queues.get(request_hash(data))
        if not queue:
            divergence = Divergence(
                self._explain(request, data), member=request.member, phase=request.phase, call=self.calls
            )
            self.divergence = self.divergence or divergence
            raise divergence
        exchange = queue.popleft()
        if exchange.error is not None:
            e = exchange.error
            raise ModelError(e.kind, e.message, status=e.status)  # type: ignore[arg-type]
        if exchange.response is None:  # cancelled when it was recorded: the same limit cuts it now
            await anyio.sleep_forever()
        return ModelResponse.model_validate(exchange.response)

    def _explain(self, request: ModelRequest, data: dict[str, Any]) -> str:
        path = self.recording.path
        who = describe(request.member, request.phase)
        head = f"the run diverged from the recording {path} at call {self.calls}: {who} is not in the recording."
        tail = (
            "Nothing was answered in its place. If the change is intended, record the run again "
            f"(mcp-team run --record {path} ...)."
        )
        key = request_hash(data)
        if key in self._queues:  # recorded, and every recorded answer to it was given already
            times = sum(e.hash == key for e in self.recording.exchanges)
            return (
                f"{head}\nThe recording has this very request, answered {times} time(s), and the run asked it once "
                f"more: it asked the same thing more often than when it was recorded.\n{tail}"
            )
        same = [e for e in self.recording.exchanges if (e.member, e.phase) == (request.member, request.phase)]
        if not same:
            asked = sorted({e.label().removeprefix("the ") for e in self.recording.exchanges})
            return f"{head}\nThe recording has no request of that member and phase; it has: {', '.join(asked)}.\n{tail}"
        closest = max(same, key=lambda e: _likeness(e.request, data))
        if request_hash(closest.request) == key != closest.hash:
            # The request is there, under a hash that is not its own: its text was changed after it was written.
            return (
                f"{head}\nThe recording has this very request ({closest.label()}, recorded call {closest.n}), but "
                "the hash written beside it does not match it: the recording was edited by hand (or written by "
                f"another version of mcp-team). Record the run again (mcp-team run --record {path} ...) rather "
                "than editing a recording."
            )
        changes = request_diff(closest.request, data)
        return (
            f"{head}\nWhat changed against the closest recorded request ({closest.label()}, recorded call "
            f"{closest.n}):\n{changes}\n{tail}"
        )


def _likeness(recorded: dict[str, Any], now: dict[str, Any]) -> tuple[int, int, int, float]:
    """How alike two requests are: same system prompt, same tools, messages in common, then text overlap."""
    old, new = recorded.get("messages", []), now.get("messages", [])
    common = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    ratio = difflib.SequenceMatcher(None, _text(old[-1:]), _text(new[-1:]), autojunk=False).quick_ratio()
    same_system, same_tools = recorded.get("system") == now.get("system"), recorded.get("tools") == now.get("tools")
    return int(same_system), int(same_tools), common, ratio


def request_diff(recorded: dict[str, Any], now: dict[str, Any], *, context: int = 2, max_lines: int = 40) -> str:
    """What differs between two requests (as `request_json` writes them), each difference as a short unified diff."""
    parts: list[str] = []
    for key in ("member", "phase", "max_tokens", "temperature"):
        if recorded.get(key) != now.get(key):
            parts.append(f"- {key}: {recorded.get(key)!r} was recorded, now {now.get(key)!r}")
    if (was := recorded.get("reply_schema")) != (asked := now.get("reply_schema")):
        said = "another schema" if was and asked else f"{_a_schema(was)} was recorded, now {_a_schema(asked)}"
        parts.append(f"- reply_schema: {said}")
    if recorded.get("system") != now.get("system"):
        parts.append("- the system prompt:\n" + _unified(recorded.get("system", ""), now.get("system", ""), context))
    old_tools = {t["name"]: t for t in recorded.get("tools", [])}
    new_tools = {t["name"]: t for t in now.get("tools", [])}
    if old_tools != new_tools:
        if gone := sorted(old_tools.keys() - new_tools.keys()):
            parts.append(f"- tools no longer offered: {', '.join(gone)}")
        if added := sorted(new_tools.keys() - old_tools.keys()):
            parts.append(f"- tools offered now that were not: {', '.join(added)}")
        for name in sorted(old_tools.keys() & new_tools.keys()):
            if old_tools[name] != new_tools[name]:
                was, is_ = json.dumps(old_tools[name], indent=1), json.dumps(new_tools[name], indent=1)
                parts.append(f"- the tool {name}:\n" + _unified(was, is_, context))
        if list(old_tools) != list(new_tools) and old_tools.keys() == new_tools.keys():
            parts.append(f"- the tools' order: {list(old_tools)} was recorded, now {list(new_tools)}")
    old, new = recorded.get("messages", []), now.get("messages", [])
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            parts.append(f"- message {i + 1} ({b.get('role', '?')}):\n" + _unified(_text([a]), _text([b]), context))
            break
    if len(old) != len(new):
        parts.append(f"- the number of messages: {len(old)} recorded, {len(new)} now")
    text = "\n".join(parts) or "- nothing visible (the requests differ only in how they are encoded)"
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"  ... ({len(lines) - max_lines} more lines)"]
    return "\n".join(lines)


def _a_schema(schema: object) -> str:
    return "none" if schema is None else "a schema"


def _unified(recorded: str, now: str, context: int) -> str:
    diff = difflib.unified_diff(recorded.splitlines(), now.splitlines(), "recorded", "now", n=context, lineterm="")
    return "\n".join(f"    {line}" for line in diff)


def _text(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as readable lines: text as it is, tool calls and results marked."""
    lines: list[str] = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, str):
            lines.append(content)
            continue
        for block in content:
            kind = block.get("type")
            if kind == "text":
                lines.append(block.get("text", ""))
            elif kind == "tool_use":
                lines.append(f"[tool call {block.get('name')}] {json.dumps(block.get('input'), sort_keys=True)}")
            elif kind == "tool_result":
                mark = " (error)" if block.get("is_error") else ""
                lines.append(f"[tool result{mark}] {block.get('content', '')}")
    return "\n".join(lines)


class ReplayModel:
    """A recorded model: it answers from the `Replay` and carries the recorded identity."""

    def __init__(self, replay: Replay, identity: ModelIdentity) -> None:
        self.replay = replay
        self.name, self.provider = identity.name, identity.provider
        self.base_url, self.price_provider = identity.base_url, identity.price_provider
        if identity.tool_calls is not None:  # as recorded: its text calls are read (or not) as they were
            self.tool_calls = identity.tool_calls

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.replay.serve(request)

    def __repr__(self) -> str:
        return f"ReplayModel({self.provider}:{self.name} from {self.replay.recording.path})"


def replay_models(source: Recording | Path | str, max_concurrency: int = 8) -> ModelSet:
    """The models of a recording, by role and member, answering from one `Replay` (`replay_of` finds it)."""
    recording = source if isinstance(source, Recording) else Recording.load(source)
    replay = Replay(recording)
    made: dict[ModelIdentity, ReplayModel] = {}

    def model(identity: ModelIdentity) -> ReplayModel:
        return made.setdefault(identity, ReplayModel(replay, identity))

    header = recording.header
    roles = {role: model(header.models[role]) for role in (SUPERVISOR, SPECIALIST) if role in header.models}
    if len(roles) < 2:
        raise ConfigError(f"{recording.path}: the header names no supervisor and specialist models")
    members = {name: model(identity) for name, identity in header.members.items()}
    return ModelSet(roles, max_concurrency, members=members)


def replay_of(models: ModelSet) -> Replay | None:
    """The `Replay` a model set answers from, if it is a replay (through any wrappers)."""
    for model in models.models.values():
        layer: object = model
        while layer is not None:
            if isinstance(layer, ReplayModel):
                return layer.replay
            layer = getattr(layer, "wrapped", None)
    return None
