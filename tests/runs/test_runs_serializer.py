"""Stored values are JSON: models, errors (ours and DBOS's) round-trip; nothing is imported from outside
the allowed packages; the step-id layout fits PostgreSQL's INT4 and leaves room for nested sub-runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from dbos._error import DBOSMaxStepRetriesExceeded, DBOSUnexpectedStepError
from pydantic import BaseModel

from mcp_team.llm import ModelError, ModelResponse, TextBlock
from mcp_team.runs.serializer import JSONSerializer, SerializationError, StoredError
from mcp_team.specialists.tools import ToolFailed

S = JSONSerializer()


def roundtrip(value: object) -> object:
    text = S.serialize(value)
    assert "gASV" not in text  # never a pickle
    json.loads(text)
    return S.deserialize(text)


def test_models_and_plain_values_round_trip() -> None:
    response = ModelResponse(content=[TextBlock(text="hi")], model="m")
    value = {"args": (response, 3, None), "kwargs": {"at": datetime(2026, 1, 2, tzinfo=UTC), "n": [1.5, "x"]}}
    assert roundtrip(value) == value


def test_model_error_keeps_kind_message_and_status() -> None:
    back = roundtrip(ModelError("rate_limited", "slow down", status=429))
    assert isinstance(back, ModelError)
    assert (back.kind, back.message, back.status, str(back)) == ("rate_limited", "slow down", 429, "slow down")


def test_tool_and_dbos_errors_come_back_as_themselves() -> None:
    assert isinstance(roundtrip(ToolFailed("no such file")), ToolFailed)
    unexpected = roundtrip(DBOSUnexpectedStepError("wf", 3, "model:a", "model:b"))
    assert isinstance(unexpected, DBOSUnexpectedStepError) and "model:a" in str(unexpected)
    retries = roundtrip(DBOSMaxStepRetriesExceeded("step", 3, [ValueError("x")]))
    assert isinstance(retries, DBOSMaxStepRetriesExceeded)


class Local(BaseModel):
    x: int


def test_values_another_process_could_not_import_are_refused_or_kept_as_text() -> None:
    with pytest.raises(SerializationError, match="cannot store a set"):
        S.serialize({1, 2})

    class Inner(Exception):
        pass

    back = roundtrip(Inner("boom"))
    assert isinstance(back, StoredError) and "boom" in str(back)
    forged = json.dumps({"$t": "model", "c": "os:system", "v": {}})
    with pytest.raises(SerializationError, match="refusing to import"):
        S.deserialize(forged)
