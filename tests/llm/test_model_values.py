"""The values the hot path builds by hand (usage sums, priced copies, the shared zero usage, started
records, a tool call's cached JSON) are exactly what pydantic's own methods give: same fields, same
`fields_set`, same dumps."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel, ValidationError

from mcp_team.handoffs.schema import Handoff, HandoffRecord, RunResult, finish_record, started_record
from mcp_team.llm.types import (
    NO_USAGE,
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    built,
    defaults_of,
    replaced,
)
from mcp_team.specialists.loop import SpecialistResult
from mcp_team.specialists.verdict import Verdict


def same(a: BaseModel, b: BaseModel) -> None:
    assert a == b
    assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__
    assert a.model_dump() == b.model_dump()
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)


@pytest.mark.parametrize("cost", [None, 0.25])
def test_replaced_is_model_copy(cost: float | None) -> None:
    usage = Usage(input_tokens=10, output_tokens=3)
    response = ModelResponse(content=[TextBlock(text="hi")], model="m", usage=usage)
    by_copy = response.model_copy(update={"usage": usage.model_copy(update={"cost_usd": cost})})
    by_hand = replaced(response, usage=replaced(usage, cost_usd=cost))
    same(by_hand, by_copy)
    same(by_hand.usage, by_copy.usage)
    assert response.usage.cost_usd == 0.0  # the original is untouched


def test_a_usage_sum_is_the_validated_sum() -> None:
    a = Usage(input_tokens=1, output_tokens=2, cache_read_input_tokens=3, cache_creation_input_tokens=4, cost_usd=0.5)
    b = Usage(input_tokens=10, output_tokens=20, cache_read_input_tokens=30, cache_creation_input_tokens=40)
    expected = Usage(
        input_tokens=11, output_tokens=22, cache_read_input_tokens=33, cache_creation_input_tokens=44, cost_usd=0.5
    )
    same(a + b, expected)
    assert (a + Usage(cost_usd=None)).cost_usd is None  # unknown is not free


def test_the_shared_zero_usage_cannot_change_and_stays_out_of_the_schemas() -> None:
    with pytest.raises(ValidationError):
        NO_USAGE.input_tokens = 1  # frozen: sharing one instance is safe
    handoff = Handoff(id="h1", seq=1, run_id="r", target="w", call_id="c", task="t")
    assert HandoffRecord.model_validate(handoff.__dict__).usage is NO_USAGE
    assert SpecialistResult(specialist="w", status="completed").usage is NO_USAGE
    assert ModelResponse(content=[], model="m").usage is NO_USAGE
    assert NO_USAGE.__pydantic_fields_set__ == Usage().__pydantic_fields_set__
    # A default_factory, not a default: the JSON schemas (MCP output schemas) name no default usage.
    schema = json.dumps(RunResult.model_json_schema())
    assert '"default": {"cache_creation_input_tokens"' not in schema
    record = HandoffRecord.model_json_schema()["$defs"]["HandoffRecord"]
    assert record["properties"]["usage"] == {"$ref": "#/$defs/Usage"}


def test_a_tool_calls_cached_json_is_its_input_and_changes_nothing_else() -> None:
    block = ToolUseBlock(id="c1", name="handoff_to_w", input={"task": "Work é", "n": [1, 2]})
    assert block.input_json == json.dumps(block.input)
    assert block.input_json is block.input_json  # encoded once
    fresh = ToolUseBlock(id="c1", name="handoff_to_w", input={"task": "Work é", "n": [1, 2]})
    assert block == fresh and fresh == block
    assert "input_json" not in block.model_dump()


@pytest.mark.parametrize(
    "handoff",
    [
        Handoff(id="h1", seq=1, run_id="r", target="w", call_id="c", task="t"),
        Handoff(
            id="h2.2",
            seq=2,
            run_id="r",
            target="w",
            call_id="c",
            task="t",
            context="x",
            expected_output="y",
            attempt=2,
            retry_of="h2",
            fallback="v took it",
        ),
    ],
)
def test_a_started_record_is_the_validated_one(handoff: Handoff) -> None:
    at = datetime.now(UTC)
    expected = HandoffRecord.model_validate({**handoff.__dict__, "started_at": at})
    record = started_record(handoff, at)
    assert record == expected
    assert record.__pydantic_fields_set__ == expected.__pydantic_fields_set__
    assert list(record.__dict__) == list(expected.__dict__) and repr(record) == repr(expected)
    assert record.model_dump_json() == expected.model_dump_json()
    record.status, record.output = "completed", "done"  # a record is written as the handoff runs
    assert started_record(handoff, at).status == "running"  # and shares nothing mutable with the next


_USAGE = Usage(input_tokens=3, output_tokens=1)
_TOOL = ToolDefinition(name="lookup", description="d", input_schema={"type": "object"})


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (TextBlock, {"text": "hi"}),
        (ToolUseBlock, {"type": "tool_use", "id": "c1", "name": "handoff_to_w", "input": {"task": "t"}}),
        (ToolResultBlock, {"tool_use_id": "c1", "content": "done"}),
        (
            Usage,
            {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        ),
        (ModelResponse, {"content": [TextBlock(text="a")], "stop_reason": "end_turn", "usage": _USAGE, "model": "m"}),
        (
            ModelRequest,
            {"system": "s", "messages": [Message(role="user", content="q")], "tools": [_TOOL], "member": "w"},
        ),
        (
            SpecialistResult,
            {"specialist": "w", "status": "completed", "output": "o", "turns": 2, "usage": _USAGE, "verdict": None},
        ),
    ],
)
def test_a_built_model_is_the_validated_one(cls: type[BaseModel], values: dict[str, object]) -> None:
    expected = cls(**values)
    made = built(cls, defaults_of(cls), values)
    same(made, expected)
    assert list(made.__dict__) == list(expected.__dict__) and repr(made) == repr(expected)
    assert made.model_dump_json() == expected.model_dump_json()


def test_a_sum_with_no_usage_is_the_validated_sum() -> None:
    # A sum sets every field, as the validated constructor given all of them does.
    for usage in (Usage(input_tokens=5, output_tokens=7, cost_usd=0.1), Usage(**Usage(input_tokens=5).model_dump())):
        same(NO_USAGE + usage, Usage(**usage.model_dump()))
        same(usage + NO_USAGE, Usage(**usage.model_dump()))


def test_a_finished_record_is_the_assigned_one() -> None:
    handoff = Handoff(id="h1", seq=1, run_id="r", target="w", call_id="c", task="t")
    at = datetime.now(UTC)
    assigned, finished = started_record(handoff, at), started_record(handoff, at)
    verdict = Verdict(verdict="PASS", reasons=["fine"])
    changes = {
        "status": "completed",
        "ended_at": at,
        "output": "o",
        "error": None,
        "error_type": None,
        "turns": 2,
        "verdict": verdict,
    }
    for name, value in changes.items():
        setattr(assigned, name, value)
    finish_record(finished, **changes)  # type: ignore[arg-type]
    same(finished, assigned)
    assert finished.model_dump_json() == assigned.model_dump_json()
