"""How DBOS stores our values: JSON, never pickle. Every process of a deployment uses this serializer.

JSON values pass as they are; a pydantic model is stored with its import path and its JSON dump; an
exception with its import path, its constructor arguments and its attributes (so `ModelError` keeps
`kind`, `message` and `status`, and DBOS's own errors come back as themselves). Only classes under
`_IMPORTABLE` are ever imported when reading: a value naming anything else is refused, so a database
row cannot make a process import arbitrary code. A model or exception defined in `__main__` (which
another process cannot import) is refused when written, with a message saying so.
"""

from __future__ import annotations

import importlib
import json
from datetime import datetime
from typing import Any

from dbos import Serializer
from pydantic import BaseModel

from mcp_team.errors import McpTeamError
from mcp_team.runs.at_rest import at_rest

_TAG = "$t"  # tagged values: {"$t": "model" | "exc" | "tuple" | "datetime" | "dict", ...}
_IMPORTABLE = ("mcp_team.", "dbos.")


class SerializationError(McpTeamError, TypeError):
    """A value that cannot be stored as JSON, or a stored value that cannot be read back."""


class StoredError(McpTeamError):
    """A stored exception whose class could not be rebuilt; `type_name` says what it was."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


class JSONSerializer(Serializer):
    def name(self) -> str:
        return "mcp_team_json_v1"

    def serialize(self, data: Any) -> str:
        # Redacted as it is encoded: DBOS's tables keep no known secret in clear (runs/at_rest.py).
        return json.dumps(at_rest(encode(data)), separators=(",", ":"), ensure_ascii=False)

    def deserialize(self, serialized_data: str) -> Any:
        return decode(json.loads(serialized_data))


def _path(cls: type) -> str:
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise SerializationError(
            f"{cls.__qualname__} is defined in __main__ or inside a function; durable values must be "
            f"defined in an importable module"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve(path: str, base: type) -> Any:
    module, _, qualname = path.partition(":")
    if not (module == "builtins" or module.startswith(_IMPORTABLE)):
        raise SerializationError(f"refusing to import {path!r} from a stored value")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise SerializationError(f"{path!r} is not a {base.__name__}")
    return obj


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {_TAG: "tuple", "v": [encode(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and _TAG not in value:
            return {k: encode(v) for k, v in value.items()}
        return {_TAG: "dict", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, BaseModel):
        return {_TAG: "model", "c": _path(type(value)), "v": value.model_dump(mode="json")}
    if isinstance(value, datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, BaseException):
        return _encode_exception(value)
    raise SerializationError(f"cannot store a {type(value).__qualname__} as JSON; use a pydantic model")


def _encode_exception(exc: BaseException) -> Any:
    reduced = exc.__reduce__()
    args = reduced[1] if isinstance(reduced, tuple) and len(reduced) > 1 else exc.args
    try:
        path = _path(type(exc))
    except SerializationError:
        return {_TAG: "exc", "c": "mcp_team.runs.serializer:StoredError", "a": [type(exc).__qualname__, str(exc)]}
    state = {}
    for key, item in vars(exc).items():
        if key.startswith("__"):
            continue
        try:
            state[key] = encode(item)
        except SerializationError:
            state[key] = repr(item)
    return {_TAG: "exc", "c": path, "a": [_safe(a) for a in args], "s": state, "m": str(exc)}


def _safe(value: Any) -> Any:
    try:
        return encode(value)
    except SerializationError:
        return repr(value)


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag is None:
        return {k: decode(v) for k, v in value.items()}
    if tag == "tuple":
        return tuple(decode(v) for v in value["v"])
    if tag == "dict":
        return {decode(k): decode(v) for k, v in value["v"]}
    if tag == "datetime":
        return datetime.fromisoformat(value["v"])
    if tag == "model":
        return _resolve(value["c"], BaseModel).model_validate(value["v"])
    if tag == "exc":
        return _decode_exception(value)
    raise SerializationError(f"unknown stored value tag {tag!r}")


def _decode_exception(value: dict[str, Any]) -> BaseException:
    args = [decode(a) for a in value["a"]]
    try:
        cls = _resolve(value["c"], BaseException)
    except (SerializationError, ImportError, AttributeError):
        return StoredError(value["c"], value.get("m", ""))
    try:
        exc = cls(*args)
    except Exception:
        exc = cls.__new__(cls)
        exc.args = tuple(args)
    for key, item in value.get("s", {}).items():
        setattr(exc, key, decode(item))
    return exc
