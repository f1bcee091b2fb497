"""The library API as a Python user imports it: `from mcp_team import ...`."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import mcp_team

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_a_team_runs_from_the_top_level_names() -> None:
    from mcp_team import Budgets, ModelSet, RunResult, RunSettings, Specialist, Team
    from mcp_team.llm.offline import OfflineModel

    crew = [Specialist(name="poet", description="Writes short poems.", system_prompt="Write the poem asked for.")]
    team = Team(ModelSet.single(OfflineModel()), crew, RunSettings(budgets=Budgets(max_handoffs=3)))
    result = await team.run("A haiku about bees")
    assert isinstance(result, RunResult) and result.status == "complete"
    assert [h.target for h in result.handoffs] == ["poet"]


async def test_a_model_of_ones_own_that_returns_something_else_is_named() -> None:
    from mcp_team import ModelSet, Team
    from mcp_team.llm import ModelRequest

    class Sloppy:
        name, provider = "sloppy", "mine"

        async def complete(self, request: ModelRequest) -> object:
            return "Bees are great."  # a str, not a ModelResponse

    with pytest.raises(TypeError, match=r"model 'sloppy' returned a str where a ModelResponse was expected"):
        await Team(ModelSet.single(Sloppy())).run("Research bees")  # type: ignore[arg-type]


def test_every_error_is_a_mcp_team_error() -> None:
    from mcp_team import BudgetExhausted, ConfigError, McpTeamError, ModelError, PlanError

    for error in (BudgetExhausted, ConfigError, ModelError, PlanError):
        assert issubclass(error, McpTeamError)


def test_the_public_names_are_listed_and_unknown_ones_are_an_attribute_error() -> None:
    assert {name for name in mcp_team.__all__ if name != "__version__"} == {
        "Team",
        "RunResult",
        "Budgets",
        "RunSettings",
        "ModelSet",
        "Specialist",
        "McpTeamError",
        "ConfigError",
        "ModelError",
        "BudgetExhausted",
        "PlanError",
        "use_tracing",
        "Tool",
        "RunEvent",
        "UnknownSpecialist",
        "DEFAULT_TEAM",
    }
    assert set(mcp_team.__all__) <= set(dir(mcp_team))
    with pytest.raises(AttributeError, match="no attribute 'Teem'"):
        _ = mcp_team.Teem  # type: ignore[attr-defined]


def test_importing_the_package_loads_no_engine() -> None:
    # The CLI imports the package on the server's start-up path: the names load on first use only.
    code = "import sys, mcp_team; print(sorted(m for m in sys.modules if m.startswith('mcp_team')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['mcp_team']"


def crew(*names: str, **fields: Any) -> list[Any]:
    from mcp_team import Specialist

    return [Specialist(name=n, description="Does it.", system_prompt="Do it.", **fields) for n in names]


def test_a_team_of_the_wrong_parts_says_so_when_it_is_built_not_when_it_runs() -> None:
    from mcp_team import ModelSet, Team
    from mcp_team.llm.offline import OfflineModel

    models = ModelSet.single(OfflineModel())
    wrong: list[tuple[Callable[[], object], str]] = [
        (lambda: Team(OfflineModel(), crew("a")), "models must be a ModelSet, not OfflineModel: e.g. ModelSet.single"),
        (lambda: Team("offline", crew("a")), "models must be a ModelSet, not str"),
        (lambda: Team(models, "a"), "specialists must be a list of Specialist, not str"),
        (lambda: Team(models, None), "specialists must be a list of Specialist, not NoneType"),
        (lambda: Team(models, [{"name": "x"}]), "specialists must be Specialist objects, not dict"),
        (lambda: Team(models, crew("a"), {"mode": "planned"}), "settings must be a RunSettings, not dict"),
    ]
    for build, message in wrong:
        with pytest.raises(TypeError, match=re.escape(message)):
            build()


@pytest.mark.parametrize(
    ("specialists", "settings", "message"),
    [
        (crew("a", "a"), {}, "'a' names two specialists; names must be unique"),
        (crew("supervisor"), {}, "'supervisor' is the name of the team's own supervisor"),
        (crew("planner"), {}, "'planner' is the name of the team's own planner"),
        (crew("a", fallback="ghost"), {}, "a's fallback 'ghost' must be another specialist of the team (a)"),
        (crew("a", fallback="a"), {}, "a's fallback 'a' must be another specialist"),
        (crew("a"), {"judge": "nobody"}, "the judge 'nobody' is not a specialist of the team (a)"),
        ([], {}, "it needs at least one specialist"),
    ],
)
def test_a_team_that_cannot_run_is_a_config_error(
    specialists: list[Any], settings: dict[str, Any], message: str
) -> None:
    from mcp_team import ConfigError, ModelSet, RunSettings, Team
    from mcp_team.llm.offline import OfflineModel

    with pytest.raises(ConfigError, match=re.escape(message)):
        Team(ModelSet.single(OfflineModel()), specialists, RunSettings(**settings))


async def test_run_arguments_are_checked_before_any_model_call() -> None:
    from mcp_team import ModelSet, Team
    from mcp_team.llm import ModelRequest, ModelResponse
    from mcp_team.llm.offline import OfflineModel

    calls: list[ModelRequest] = []

    class Counting(OfflineModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            calls.append(request)
            return await super().complete(request)

    team = Team(ModelSet.single(Counting()), crew("a"))
    with pytest.raises(ValueError, match="mode must be 'adaptive' or 'planned', not 'plannd'"):
        await team.run("hi", mode="plannd")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=re.escape("budgets must be a Budgets, not dict: e.g. Budgets(max_handoffs=40)")
    ):
        await team.run("hi", budgets={"max_handoffs": 1})  # type: ignore[arg-type]
    assert calls == []


def test_blank_prompts_and_deadlines_past_a_year_are_refused() -> None:
    from pydantic import ValidationError

    from mcp_team import Budgets, RunSettings, Specialist

    with pytest.raises(ValidationError, match="system_prompt\n  Value error, must not be blank"):
        Specialist(name="a", description="Does it.", system_prompt="   ")
    with pytest.raises(ValidationError, match="less than or equal to 31536000"):
        Budgets(deadline_seconds=1e12)  # a date past the year 9999: refused here, not when a run starts
    for field in ("call_timeout", "checkpoint_timeout"):
        with pytest.raises(ValidationError, match="finite number"):
            RunSettings(**{field: float("nan")})


async def test_a_model_that_raises_something_unexpected_propagates_after_the_record_is_kept() -> None:
    from mcp_team import ModelSet, RunResult, Team
    from mcp_team.llm import ModelRequest, ModelResponse
    from mcp_team.llm.offline import OfflineModel

    class Buggy:
        name, provider = "buggy", "mine"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise RuntimeError("a bug in my model")

    models = ModelSet({"supervisor": OfflineModel(), "specialist": Buggy()})
    records: list[RunResult] = []
    with pytest.raises(RuntimeError, match="a bug in my model"):
        await Team(models).run("Research bees", on_finish=records.append)
    [record] = records
    assert record.status == "failed" and record.stopped_by == "an unexpected RuntimeError: a bug in my model"
    assert record.handoffs and all(h.status == "failed" for h in record.handoffs)
    assert record.answer.startswith("The run stopped on an unexpected RuntimeError: a bug in my model.")


def test_help_shows_the_team_not_five_prompts() -> None:
    import pydoc

    from mcp_team import Team

    text = pydoc.render_doc(Team, renderer=pydoc.plaintext)
    assert "specialists: 'Sequence[Specialist]' = DEFAULT_TEAM" in text and "runtime: 'Runtime' = EPHEMERAL" in text
    assert "`settings`: mode, budgets" in text and "Gather the facts" not in text
