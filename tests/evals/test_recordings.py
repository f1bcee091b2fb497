"""Record and replay whole runs: recordings made through the anthropic test server replay with no model at all
and the same results (parallel branches in any completion order, a planned DAG, a retry after a fault); a
changed prompt stops the replay with the difference; the server and the CLI record; secrets never reach a file."""

from __future__ import annotations

import functools
import json
import random
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_team import Team
from mcp_team.errors import ConfigError
from mcp_team.evals import Divergence, assert_replays, comparable, record_run, replay_recording, run_replayed
from mcp_team.handoffs import RunSettings
from mcp_team.llm import Model, ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.building import build_models
from mcp_team.llm.faults import parse_faults, with_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.replay import Recording, replay_models, request_diff
from mcp_team.llm.settings import ModelSettings
from mcp_team.llm.wrappers import WrapperModel, map_models
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.telemetry.content import clear_secrets, register_secret
from support import MCP_TEAM, clean_env, cli_here
from support.fake_api import offline_brain
from support.fake_messages_api import FakeMessagesAPI
from support.recorded_runs import API_KEY, CASES, Case

pytestmark = [pytest.mark.anyio, pytest.mark.process]

CASE_IDS = [c.name for c in CASES]


# -- the regression test a recording becomes ------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_committed_recording_replays_as_recorded(case: Case) -> None:
    outcome = assert_replays(case.path)  # the whole regression test, for a user's own recording too
    assert outcome.result.status == "complete" and outcome.unused == []


def test_the_committed_recordings_were_made_through_the_anthropic_backend() -> None:
    for case in CASES:
        recording = Recording.load(case.path)
        assert {m.provider for m in recording.header.models.values()} == {"anthropic"}
        assert recording.result is not None and recording.exchanges
    retry = Recording.load(CASES[2].path)
    errors = [e for e in retry.exchanges if e.error is not None]
    assert [(e.member, e.error.kind, e.error.status) for e in errors if e.error] == [
        ("researcher", "rate_limited", 429)
    ]
    assert [h["id"] for h in retry.result["handoffs"]] == ["h1", "h1.2", "h2"]  # type: ignore[index]


# -- recorded now, through the anthropic test server; replayed offline ---------------------------------------


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case recorded again, now, on the anthropic backend against the fake Messages API: the retry through
    `mcp-team run --record` as a user runs it (the command's `main`, in this process: what it writes is the
    point; the replay below keeps a process of its own), the others through the library (the same models)."""
    folder = tmp_path_factory.mktemp("recordings")
    paths = {case.name: folder / f"{case.name}.jsonl" for case in CASES}
    with FakeMessagesAPI(brain=offline_brain) as api:
        for case in CASES:
            if case.faults:
                faults = [arg for fault in case.faults for arg in ("--fault", fault)]
                proc = cli_here(
                    "run", "--ephemeral", "--json", "--quiet", "--record", str(paths[case.name]), "--mode", case.mode,
                    *faults, case.request, ANTHROPIC_API_KEY=API_KEY, ANTHROPIC_BASE_URL=api.base_url,
                )  # fmt: skip
                assert proc.returncode == 0, proc.stderr
                assert json.loads(proc.stdout)["status"] == "complete"
                continue
            settings = ModelSettings(model="anthropic", anthropic_api_key=API_KEY, anthropic_base_url=api.base_url)
            team = Team(build_models(settings), DEFAULT_TEAM)
            result = anyio.run(functools.partial(record_run, team, paths[case.name], case.request, mode=case.mode))
            assert result.status == "complete"
        assert len(api.requests) == sum(len(Recording.load(p).exchanges) for p in paths.values()) - 1  # one 429
    return paths


class Shuffled(WrapperModel):
    """Answers after a random pause, so parallel branches finish in a different order on every run."""

    def __init__(self, wrapped: Model, rng: random.Random) -> None:
        super().__init__(wrapped)
        self.rng = rng

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep(self.rng.random() / 50)
        return await self.wrapped.complete(request)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
async def test_a_fresh_recording_replays_with_the_same_result_in_any_completion_order(
    fresh: dict[str, Path], case: Case, seed: int
) -> None:
    recording = Recording.load(fresh[case.name])
    rng = random.Random(seed)
    models = map_models(replay_models(recording), lambda model: Shuffled(model, rng))
    settings = RunSettings.model_validate(recording.header.run["settings"])
    result = await run_replayed(Team(models, DEFAULT_TEAM, settings), case.request)
    assert comparable(result) == {k: v for k, v in (recording.result or {}).items() if k != "type"}


class ResearcherLast(WrapperModel):
    """Holds the researcher's call until the analyst has answered: the opposite of the recorded order."""

    def __init__(self, wrapped: Model, analyst_done: anyio.Event, finished: list[str]) -> None:
        super().__init__(wrapped)
        self.analyst_done, self.finished = analyst_done, finished

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.member == "researcher":
            await self.analyst_done.wait()
        response = await self.wrapped.complete(request)
        if request.member == "analyst" and not response.tool_uses:
            self.analyst_done.set()
        self.finished.append(request.member)
        return response


@pytest.mark.parametrize("case", CASES[:2], ids=CASE_IDS[:2])
async def test_parallel_branches_finishing_in_the_other_order_give_the_recorded_result(case: Case) -> None:
    recording = Recording.load(case.path)
    recorded_order = [e.member for e in recording.exchanges if e.member in ("researcher", "analyst")]
    assert recorded_order.index("researcher") < len(recorded_order) - 1  # recorded: the researcher did not finish last
    done, finished = anyio.Event(), []
    models = map_models(replay_models(recording), lambda model: ResearcherLast(model, done, finished))
    settings = RunSettings.model_validate(recording.header.run["settings"])
    result = await run_replayed(Team(models, DEFAULT_TEAM, settings), case.request)
    assert [m for m in finished if m in ("researcher", "analyst")][-1] == "researcher"  # now it did
    assert comparable(result) == {k: v for k, v in (recording.result or {}).items() if k != "type"}


def test_the_cli_replays_a_recording_without_any_model(fresh: dict[str, Path]) -> None:
    # No API key, no server: the recording alone. The request and mode come from the recording. (The module's one
    # command in a process of its own.)
    proc = _cli("run", "--json", "--model", f"replay:{fresh['planned-dag']}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["mode"] == "planned" and [t["specialist"] for t in result["plan"]["tasks"]] == [
        "researcher",
        "analyst",
        "writer",
        "reviewer",
    ]
    assert "replaying" in proc.stderr and "the replay reproduced the recorded run" in proc.stderr
    assert "a recorded or replayed run is not kept in the runs database" in proc.stderr  # said, not silent


# -- divergence -----------------------------------------------------------------------------------------------


async def test_a_changed_prompt_stops_the_replay_naming_the_difference(fresh: dict[str, Path]) -> None:
    changed = tuple(
        s.model_copy(update={"system_prompt": s.system_prompt.replace("bullet points over prose", "long essays")})
        if s.name == "researcher"
        else s
        for s in DEFAULT_TEAM
    )
    with pytest.raises(Divergence) as caught:
        await replay_recording(fresh["adaptive-parallel"], specialists=changed)
    message = str(caught.value)
    assert caught.value.member == "researcher" and caught.value.phase == "specialist"
    assert "the researcher's request is not in the recording" in message
    assert "- the system prompt:" in message
    assert "-Gather the facts" in message and "bullet points over prose" in message
    assert "+Gather the facts" in message and "long essays" in message
    assert "Nothing was answered in its place" in message


def test_a_divergence_names_a_reply_schema_asked_now_and_not_when_recorded() -> None:
    """A recording made before an ask held its reply to a schema (handoffs/supervisor.py's `_delegate_first`)."""
    recorded = {"member": "supervisor", "phase": "act", "system": "s", "messages": [], "tools": []}
    held = {**recorded, "reply_schema": {"type": "object", "required": ["name"]}}
    assert request_diff(recorded, held) == "- reply_schema: none was recorded, now a schema"
    assert request_diff(held, recorded) == "- reply_schema: a schema was recorded, now none"
    other = {**recorded, "reply_schema": {"type": "object", "required": ["task"]}}
    assert request_diff(held, other) == "- reply_schema: another schema"


def test_the_cli_stops_a_diverging_replay_with_the_difference(fresh: dict[str, Path]) -> None:
    proc = cli_here(
        "run", "--ephemeral", "--model", f"replay:{fresh['retry-after-fault']}", "Research wasps and calculate 2+2"
    )
    assert proc.returncode == 1
    assert "the supervisor's act request is not in the recording" in proc.stderr
    assert "-Research bees and calculate 2+2" in proc.stderr and "+Research wasps and calculate 2+2" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_bad_recording_is_a_clear_usage_error(tmp_path: Path) -> None:
    missing = cli_here("run", "--model", f"replay:{tmp_path / 'nope.jsonl'}", "x")
    assert missing.returncode == 2 and "no such recording" in missing.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "header", "format": "mcp-team-recording", "version": 1}\n')
    proc = cli_here("run", "--model", f"replay:{broken}", "x")
    assert proc.returncode == 2 and "broken.jsonl, line 1: not a valid recording line" in proc.stderr
    assert "created_at" in proc.stderr and "Traceback" not in proc.stderr + missing.stderr
    with pytest.raises(ConfigError, match="is this an mcp-team recording"):
        Recording.load(Path(__file__).parents[1] / "fixtures" / "echo_mcp_server.py")


# -- what a recording holds -----------------------------------------------------------------------------------


async def test_a_timeout_is_recorded_and_cuts_the_replay_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "timeout.jsonl"
    settings = RunSettings(call_timeout=0.2)
    team = Team(with_faults(ModelSet.single(OfflineModel()), parse_faults("timeout:researcher:1")), settings=settings)
    recorded = await record_run(team, path, "Research bees")
    assert [(h.id, h.error_type) for h in recorded.handoffs][:1] == [("h1", "timeout")]
    assert [e.member for e in Recording.load(path).exchanges if e.cancelled] == ["researcher"]
    (await replay_recording(path)).assert_same()


async def test_secrets_never_reach_the_file_and_the_replay_still_matches(tmp_path: Path) -> None:
    secret = "sk-live-RECORDED-0123456789abcdef"
    register_secret(secret)
    try:
        path = tmp_path / "secret.jsonl"
        await record_run(Team(ModelSet.single(OfflineModel())), path, f"Research bees; my key is {secret}")
        text = path.read_text()
        assert secret not in text and "[redacted]" in text
        (await replay_recording(path, request=f"Research bees; my key is {secret}")).assert_same()
    finally:
        clear_secrets()


async def test_the_server_records_every_run_team_call(tmp_path: Path) -> None:
    settings = ModelSettings(model="offline", record_dir=str(tmp_path / "runs"))
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("run_team", {"request": "Research bees and write a haiku"})
    run_id = result.structured_content["run_id"]  # type: ignore[index]
    path = tmp_path / "runs" / f"{run_id}.jsonl"
    recording = Recording.load(path)
    assert recording.header.run["request"] == "Research bees and write a haiku"
    assert {e.member for e in recording.exchanges} == {"supervisor", "researcher", "writer"}
    (await replay_recording(path)).assert_same()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCP_TEAM, *args], capture_output=True, text=True, timeout=60, env=clean_env())
