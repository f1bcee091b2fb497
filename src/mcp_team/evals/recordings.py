"""Whole runs recorded and replayed: `record_run` writes a run's every model exchange and its result
(`llm.recording`); `replay_recording` runs it again on the recording alone and says what differs.

A recorded run becomes a regression test in a few lines:

    from mcp_team.evals import assert_replays

    def test_the_bees_report_still_runs_as_recorded():
        assert_replays("tests/recordings/bees.jsonl")

It fails with the first difference: a request the recording does not have (`Divergence`: who asked,
why, and a diff against the closest recorded request), or a result that is not the recorded one.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from mcp_team.errors import ConfigError, message_of
from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.llm.recording import Exchange, Recorder
from mcp_team.llm.replay import Recording, replay_models, replay_of
from mcp_team.specialists import DEFAULT_TEAM, Specialist
from mcp_team.telemetry.content import redact_value

# What a run's result is, for comparing two runs: not its ids, times or trace.
_NOT_COMPARED = {"run_id", "trace_id", "started_at", "ended_at"}
_HANDOFF_NOT_COMPARED = {"run_id", "started_at", "ended_at"}


def comparable(result: RunResult) -> dict[str, Any]:
    """The parts of a result a replay must reproduce exactly, as JSON (redacted, as recordings are)."""
    data = result.model_dump(mode="json", exclude=_NOT_COMPARED)
    data["handoffs"] = [{k: v for k, v in h.items() if k not in _HANDOFF_NOT_COMPARED} for h in data["handoffs"]]
    # Fields added by issue 13 compare as recorded before they existed when a run does not use them.
    for key in ("checkpoints", "conflicts"):
        if not data.get(key):
            data.pop(key, None)
    for h in data["handoffs"]:
        if h.get("subrun") is None:
            h.pop("subrun", None)
    redacted: dict[str, Any] = redact_value(data)
    return redacted


async def record_run(team: Team, path: Path | str, request: str, **run: Any) -> RunResult:
    """`team.run(request, **run)` with every model exchange written to `path`, then the result.

    The header says how to run it again: the request, the mode and the run settings in effect (budgets
    included), and the team's specialists.
    """
    settings = team.settings.model_copy(
        update={k: v for k, v in (("mode", run.get("mode")), ("budgets", run.get("budgets"))) if v is not None}
    )
    about = {
        "request": request,
        "mode": settings.mode,
        "settings": settings.model_dump(mode="json"),
        "specialists": [s.name for s in team.specialists],
    }
    with Recorder(path, team.models, about) as recorder:
        result = await dataclasses.replace(team, models=recorder.models).run(request, **run)
        recorder.finish(comparable(result))
    return result


@dataclass
class RecordedTeam:
    """A team as the run service's engine (runs/types.py `Engine`) whose every run is recorded: to `path` (a file),
    or to `<path>/<run id>.jsonl` when `path` is a directory (MCP_TEAM_RECORD_DIR). A recorded run is its own
    record: it never resumes, so its team hash names no team."""

    team: Team
    path: Path
    into_directory: bool = False
    team_hash: str = "recorded"

    async def run(self, run: Any, runtime: Any, on_event: Any, on_finish: Any, approve: Any = None) -> RunResult:
        path = self.path / f"{run.run_id}.jsonl" if self.into_directory else self.path
        return await record_run(self.team, path, run.request, mode=run.mode, budgets=run.budgets, on_event=on_event,
                                on_finish=on_finish, run_id=run.run_id, started_at=run.started_at,
                                checkpoints=run.checkpoints, approve=approve)  # fmt: skip


@dataclass
class ReplayOutcome:
    """A replayed run: its result, the recorded one, and the recorded calls it never asked for."""

    path: Path
    result: RunResult
    recorded: dict[str, Any] | None
    unused: list[Exchange] = field(default_factory=list)

    def differences(self) -> list[str]:
        """Each way the replayed result differs from the recorded one, in words; empty when it is the same."""
        if self.recorded is None:
            return [f"{self.path} has no recorded result to compare with (the recorded run did not finish)"]
        recorded = {k: v for k, v in self.recorded.items() if k != "type"}
        found = _diff(recorded, comparable(self.result), "result")
        if self.unused:
            calls = ", ".join(f"{e.n} ({e.label()})" for e in self.unused[:5])
            found.append(f"the replay never asked {len(self.unused)} recorded call(s): {calls}")
        return found

    def assert_same(self) -> None:
        """Raise `AssertionError` listing the differences, if there are any."""
        if found := self.differences():
            listed = "\n".join(f"- {d}" for d in found[:20])
            raise AssertionError(f"the replay of {self.path} differs from the recorded run:\n{listed}")


async def replay_recording(
    path: Path | str,
    *,
    specialists: Sequence[Specialist] = DEFAULT_TEAM,
    settings: RunSettings | None = None,
    request: str | None = None,
) -> ReplayOutcome:
    """Run a recorded run again on its recording alone: the recorded request, mode and settings unless
    given, on `specialists` (the built-in team unless given). Raises `Divergence` when the run asks
    something the recording does not have."""
    recording = Recording.load(path)
    about = recording.header.run
    if settings is None:
        settings = _recorded_settings(recording)
    if request is None:
        request = str(about.get("request", ""))
    models = replay_models(recording)
    team = Team(models, specialists, settings)
    result = await run_replayed(team, request)
    replay = replay_of(models)
    return ReplayOutcome(recording.path, result, recording.result, replay.unused() if replay else [])


async def run_replayed(team: Team, request: str, **run: Any) -> RunResult:
    """`team.run` on replayed models, with a divergence raised as itself (not inside an exception group)."""
    try:
        return await team.run(request, **run)
    except Exception:
        replay = replay_of(team.models)
        if replay is not None and replay.divergence is not None:
            raise replay.divergence from None
        raise


def _recorded_settings(recording: Recording) -> RunSettings:
    """The run settings in the recording's header; `ConfigError` when this version cannot read them."""
    about = recording.header.run
    if "settings" not in about:
        return RunSettings()
    try:
        return RunSettings.model_validate(about["settings"])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {message_of(e)}" for e in exc.errors())
        raise ConfigError(
            f"{recording.path}: the recorded run settings are not ones this mcp-team reads ({problems}); was it "
            "recorded by another version? Pass settings= to replay it, or record it again"
        ) from None


def assert_replays(path: Path | str, **options: Any) -> ReplayOutcome:
    """Replay a recording (see `replay_recording`) and assert the run is the recorded one; for plain tests."""
    outcome = anyio.run(functools.partial(replay_recording, path, **options))
    outcome.assert_same()
    return outcome


def _diff(recorded: Any, now: Any, where: str) -> list[str]:
    if isinstance(recorded, dict) and isinstance(now, dict):
        found: list[str] = []
        for key in [*recorded, *(k for k in now if k not in recorded)]:
            found += _diff(recorded.get(key), now.get(key), f"{where}.{key}")
        return found
    if isinstance(recorded, list) and isinstance(now, list):
        if len(recorded) != len(now):
            return [f"{where}: {len(recorded)} recorded, {len(now)} now"]
        return [d for i, (a, b) in enumerate(zip(recorded, now, strict=True)) for d in _diff(a, b, f"{where}[{i}]")]
    if recorded != now:
        return [f"{where}: {_short(recorded)} was recorded, now {_short(now)}"]
    return []


def _short(value: Any, width: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
