"""Wrong inputs at the library's entry points, as a Python user makes them: each is refused where it is made,
naming the argument and how to write it, instead of being dropped or failing deep inside a run."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mcp_team import ConfigError, ModelSet, RunSettings, Specialist, Team, Tool
from mcp_team.llm import ModelRequest, ModelResponse, TextBlock
from mcp_team.llm.offline import OfflineModel

pytestmark = pytest.mark.anyio


def member(name: str = "scout", **extra: Any) -> Specialist:
    return Specialist(name=name, description="Finds facts.", system_prompt="List facts only.", **extra)


def team(**settings: Any) -> Team:
    return Team(ModelSet.single(OfflineModel()), [member()], RunSettings(**settings))


def test_a_misspelt_specialist_keyword_is_an_error_not_a_dropped_setting() -> None:
    with pytest.raises(ValidationError, match=r"max_turn\n.*Extra inputs are not permitted"):
        member(max_turn=2)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"checkpoints": ["before:writer"]},
            r"checkpoint 'before:writer': there is no member 'writer' \(the team: scout\)",
        ),
        ({"checkpoints": ["befor:scout"]}, r"checkpoint 'befor:scout': use \"plan\" or \"before:<member>\""),
        ({"gates": {"writer": {"max_words": 10}}}, r"gates: 'writer' is not a specialist of the team \(scout\)"),
    ],
)
def test_a_checkpoint_or_gate_that_names_nobody_is_refused_when_the_team_is_made(
    settings: dict[str, Any], message: str
) -> None:
    # Before, the run went ahead without the checkpoint or gate: a safeguard silently off.
    with pytest.raises(ConfigError, match=message):
        team(**settings)


def test_specialists_from_a_generator_make_a_team() -> None:
    made = Team(ModelSet.single(OfflineModel()), (member(n) for n in ("scout", "pitch")))  # type: ignore[arg-type]
    assert [s.name for s in made.specialists] == ["scout", "pitch"]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            OfflineModel,
            r"models\['supervisor'\] is the class OfflineModel, not a model: pass an instance, e.g. OfflineModel\(\)",
        ),
        (
            "offline",
            r"models\['supervisor'\] is a str, not a model: a model has `name`, `provider` and `async def complete",
        ),
        (None, r"models\['supervisor'\] is a NoneType, not a model"),
    ],
)
def test_what_is_not_a_model_is_refused_by_the_model_set(model: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ModelSet.single(model)  # type: ignore[arg-type]


def test_a_concurrency_below_one_names_max_concurrency() -> None:
    with pytest.raises(
        ValueError, match=r"^max_concurrency must be at least 1 \(model calls in flight at once\), not 0$"
    ):
        ModelSet.single(OfflineModel(), max_concurrency=0)


async def test_a_model_with_a_plain_def_complete_is_told_to_make_it_async() -> None:
    class Sync:
        name, provider = "sync", "mine"

        def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(content=[TextBlock(text="hi")], model=self.name)

    made = Team(ModelSet.single(Sync()), [member()])  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"model 'sync''s complete\(\) returned a ModelResponse, not an awaitable: write"
    ):
        await made.run("Find facts")


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        (None, TypeError, r"^request must be a str \(what the team should do\), not NoneType$"),
        ("  ", ValueError, r"^request is blank: say what the team should do$"),
    ],
)
async def test_a_request_that_is_not_text_or_blank_is_refused_before_any_model_call(
    request_: object, error: type[Exception], message: str
) -> None:
    model = OfflineModel()
    made = Team(ModelSet.single(model), [member()])
    with pytest.raises(error, match=message):
        await made.run(request_)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        await made.plan(request_)  # type: ignore[arg-type]
    assert model.calls == 0


async def test_one_checkpoint_name_as_a_str_is_not_read_letter_by_letter() -> None:
    with pytest.raises(TypeError, match=r"checkpoints must be a list of names, not a str: checkpoints=\['plan'\]"):
        await team().run("Find facts", checkpoints="plan")


async def test_a_blank_task_for_ask_names_the_task() -> None:
    with pytest.raises(ValueError, match=r"^task is blank: say what the specialist should do, self-contained$"):
        await team().ask("scout", "")


def test_a_tool_with_a_schema_that_is_not_a_dict_is_refused_when_it_is_made() -> None:
    async def run(arguments: dict[str, Any]) -> str:
        return "done"

    with pytest.raises(TypeError, match=r"tool 'lookup': input_schema must be a JSON schema dict, not str"):
        Tool("lookup", "Looks things up.", "object", run)  # type: ignore[arg-type]


async def test_a_naive_start_time_is_refused_before_the_run() -> None:
    from datetime import datetime

    on_finish: list[str] = []
    with pytest.raises(TypeError, match=r"^started_at must be a timezone-aware datetime, e\.g\. datetime\.now\("):
        await team().run("Find facts", started_at=datetime.now(), on_finish=lambda r: on_finish.append(r.status))
    assert on_finish == []  # refused, not a run that failed part-way
