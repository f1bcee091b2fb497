"""`mcp-team eval` as a user runs it: a suite through the CLI with both outcomes, the JSON report, repeats, the
single-agent baseline, the built-in routing suite, any backend (the anthropic test server, then its recordings
replayed), and clear errors for bad suites."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_team.evals.runner import EvalPlan, check, run_all
from mcp_team.evals.suite import Case, Expect, Suite, load_suite
from mcp_team.handoffs import RunSettings
from mcp_team.llm import Model, ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.wrappers import WrapperModel
from mcp_team.specialists import DEFAULT_TEAM
from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here
from support.fake_api import offline_brain
from support.fake_messages_api import FakeMessagesAPI

pytestmark = [pytest.mark.process]

SUITE = """\
name = "small"

[[cases]]
name = "bees"
request = "Research bees and write a haiku"
expect = { called = ["researcher", "writer"], order = ["researcher", "writer"], max_cost_usd = 1.0 }

[[cases]]
name = "sum"
request = "Calculate 2+2"
expect = { called = ["analyst"], only = true, contains = ["= 4"], max_handoffs = 1 }

[[cases]]
name = "fizz"
request = "Implement fizzbuzz in Python"
expect.called = ["coder"]
expect.not_called = ["writer"]
"""


def eval_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCP_TEAM, "eval", *args], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(**(env or {}))
    )


def eval_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`eval_cli` through `main` in this process (see `cli_here`): the module keeps one eval in a process."""
    return cli_here("eval", *args, **(env or {}))


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(SUITE)
    return path


def report_of(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def test_a_suite_that_passes_exits_0_with_the_table_and_a_json_report(suite: Path, tmp_path: Path) -> None:
    proc = eval_cli(str(suite), "--model", "offline", "--report", str(tmp_path / "report.json"))

    assert proc.returncode == 0, proc.stderr
    assert "small: 3/3 cases pass" in proc.stdout and "FAIL" not in proc.stdout
    for column in ("case", "routed to", "expected", "pass", "handoffs", "tokens", "cost", "wall time"):
        assert column in proc.stdout
    assert "researcher → writer" in proc.stdout
    assert "no LLM is called" in proc.stderr and "not how well a model routes" in proc.stdout  # never a model's score
    report = report_of(tmp_path / "report.json")
    assert report["passed"] is True and report["backend"] == "offline" and "no LLM is called" in report["notice"]
    assert [c["name"] for c in report["cases"]] == ["bees", "sum", "fizz"]
    bees = report["cases"][0]["runs"][0]
    assert bees["routed"] == ["researcher", "writer"] and bees["handoffs"] == 2 and bees["model_calls"] > 2
    assert bees["tokens"] > 0 and bees["cost_usd"] is None  # offline calls have no price
    assert {c["check"]: c["passed"] for c in bees["checks"]} == {
        "status": True,
        "max_cost_usd": True,
        "called": True,
        "order": True,
    }


def test_one_failing_case_fails_the_eval_and_says_why(suite: Path, tmp_path: Path) -> None:
    suite.write_text(SUITE.replace('expect.called = ["coder"]', 'expect.called = ["coder", "reviewer"]'))
    proc = eval_here(str(suite), "--model", "offline", "--report", str(tmp_path / "report.json"), "--quiet")

    assert proc.returncode == 1
    assert "small: 2/3 cases pass" in proc.stdout and "FAIL" in proc.stdout
    assert "✗ fizz: called: reviewer was not called" in proc.stdout
    report = report_of(tmp_path / "report.json")
    assert report["passed"] is False
    assert [(c["name"], c["passed"]) for c in report["cases"]] == [("bees", True), ("sum", True), ("fizz", False)]


def test_the_single_agent_baseline_is_compared_side_by_side(suite: Path, tmp_path: Path) -> None:
    proc = eval_here(
        str(suite), "--model", "offline", "--baseline", "single-agent", "--report", str(tmp_path / "r.json"), "--quiet"
    )

    assert proc.returncode == 0, proc.stderr
    assert "The team against a single agent" in proc.stdout
    for column in ("model calls", "tokens", "cost", "wall time", "pass rate (answer)"):
        assert column in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("│ team ", "│ single agent "))]
    assert len(rows) == 2 and "100%" in rows[1]
    report = report_of(tmp_path / "r.json")
    team, single = report["totals"], report["baseline"]["totals"]
    assert single["model_calls"] < team["model_calls"] and single["tokens"] < team["tokens"]
    assert single["answer_pass_rate"] == 1.0
    [sum_case] = [c for c in report["baseline"]["cases"] if c["name"] == "sum"]
    run = sum_case["runs"][0]
    assert run["routed"] == [] and {c["check"] for c in run["checks"]} == {"status", "contains"}  # no routing checks
    assert "= 4" in run["answer"]  # the single agent used the analyst's calculate tool itself


def test_repeat_gives_a_pass_rate_per_case(suite: Path, tmp_path: Path) -> None:
    proc = eval_here(str(suite), "--model", "offline", "--repeat", "3", "--report", str(tmp_path / "r.json"), "--quiet")

    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│")]
    assert "pass rate" in proc.stdout and len(rows) == 3 and all("3/3" in row for row in rows)
    report = report_of(tmp_path / "r.json")
    assert report["repeat"] == 3 and all(len(c["runs"]) == 3 and c["pass_rate"] == 1.0 for c in report["cases"])


def test_a_report_that_could_not_be_written_is_refused_before_any_run(suite: Path, tmp_path: Path) -> None:
    (tmp_path / "no").write_text("a file where the report's directory would be")
    proc = eval_here(str(suite), "--model", "offline", "--report", str(tmp_path / "no" / "r.json"))
    assert proc.returncode == 2 and f"{tmp_path / 'no'} is a file, not a directory" in proc.stderr, proc.stderr
    assert "case(s) from" not in proc.stderr  # no case ran


def test_a_reports_missing_directory_is_made_as_run_makes_a_traces(suite: Path, tmp_path: Path) -> None:
    proc = eval_here(str(suite), "--model", "offline", "--report", str(tmp_path / "new" / "r.json"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert report_of(tmp_path / "new" / "r.json")["cases"]


def test_the_builtin_routing_suite_passes_offline_and_says_it_is_not_a_model() -> None:
    suite, _ = load_suite("builtin")
    assert len(suite.cases) >= 30
    tags = {t for case in suite.cases for t in case.tags}
    assert {"research", "analysis", "writing", "code", "review", "mixed", "single", "planned"} <= tags
    assert {"competitive-intelligence", "contract-review", "curriculum", "patient-case", "portfolio"} <= tags

    proc = eval_here("builtin", "--model", "offline", "--quiet")
    assert proc.returncode == 0, proc.stdout
    assert f"{len(suite.cases)}/{len(suite.cases)} cases pass" in proc.stdout
    assert "offline backend: deterministic answers, no LLM is called" in proc.stdout


def test_any_backend_the_anthropic_test_server_then_its_recordings_replayed(suite: Path, tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    with FakeMessagesAPI(brain=offline_brain) as api:
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-EVAL-0123456789",
            "ANTHROPIC_BASE_URL": api.base_url,
            "MCP_TEAM_PRICES": json.dumps({api.base_url: "anthropic"}),  # priced as Anthropic's own API
        }
        live = eval_here(str(suite), "--record", str(recordings), "--report", str(tmp_path / "live.json"), env=env)
        sent = len(api.requests)
    assert live.returncode == 0, live.stderr
    assert "$0.0" in live.stdout and "no LLM is called" not in live.stdout + live.stderr
    assert sorted(p.name for p in recordings.iterdir()) == ["bees.jsonl", "fizz.jsonl", "sum.jsonl"]

    # No server, no key: the recordings alone give the same routing, tokens and cost.
    replayed = eval_here(str(suite), "--model", f"replay:{recordings}", "--report", str(tmp_path / "replayed.json"))
    assert replayed.returncode == 0, replayed.stderr
    assert "no model is called" in replayed.stderr
    live_report, replay_report = report_of(tmp_path / "live.json"), report_of(tmp_path / "replayed.json")
    assert live_report["totals"]["model_calls"] == sent
    for key in ("model_calls", "tokens", "cost_usd", "pass_rate"):
        assert replay_report["totals"][key] == live_report["totals"][key], key
    assert live_report["totals"]["cost_usd"] > 0

    # A case whose request changed is not in its recording: it fails, saying where the run diverged.
    suite.write_text(SUITE.replace("Calculate 2+2", "Calculate 3+3"))
    changed = eval_here(str(suite), "--model", f"replay:{recordings}", "--quiet")
    assert changed.returncode == 1
    assert "✗ sum: Divergence: the run diverged from the recording" in changed.stdout
    assert "(error)" in changed.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[cases]]\nname = "a"\nrequest = "r"\nexpect.calld = ["coder"]\n', "cases[0] (a).expect.calld: Extra inputs"),
        ('[[cases]]\nname = "a"\nrequest = "r"\nexpect.called = ["coderr"]\n', "unknown specialist 'coderr'"),
        ('[[cases]]\nname = "a"\nrequest = "r"\nexpect.matches = ["(oops"]\n', "not a valid regular expression"),
        ('[[cases]]\nname = "a"\nrequest = "r"\n[[cases]]\nname = "a"\nrequest = "s"\n', "used more than once: a"),
        ("cases = [", "not valid TOML"),
        ('name = "empty"\n', "cases: Field required"),
    ],
)
def test_a_bad_suite_is_a_usage_error_naming_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = eval_here(str(path), "--model", "offline")
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_suite_points_at_the_builtin_one(tmp_path: Path) -> None:
    proc = eval_here(str(tmp_path / "nope.toml"), "--model", "offline")
    assert proc.returncode == 2 and "no such suite file" in proc.stderr and "mcp-team eval builtin" in proc.stderr


# -- the runner, as a library ---------------------------------------------------------------------------------


class Gate(WrapperModel):
    """Holds every call until `width` calls are in flight at once, and remembers the most there ever were."""

    def __init__(self, wrapped: Model, width: int) -> None:
        super().__init__(wrapped)
        self.width, self.in_flight, self.most = width, 0, 0
        self.full = anyio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.width:
            self.full.set()
        try:
            await self.full.wait()
            return await self.wrapped.complete(request)
        finally:
            self.in_flight -= 1


@pytest.mark.anyio
async def test_cases_run_concurrently_within_the_model_concurrency_limit() -> None:
    gate = Gate(OfflineModel(), width=2)
    models = ModelSet.single(gate, max_concurrency=2)
    cases = [Case(name=f"c{i}", request=f"Implement case {i} in Python") for i in range(4)]
    plan = EvalPlan(Suite(cases=cases), DEFAULT_TEAM, RunSettings(), lambda case, attempt: models, concurrency=2)
    with anyio.fail_after(HANG_GUARD):  # were the cases run one at a time, the first call would wait forever
        runs = await run_all(plan)
    assert [r.case.name for r in runs] == ["c0", "c1", "c2", "c3"] and all(r.passed for r in runs)
    assert gate.most == 2  # two at once, never more than the limit


def test_checks_say_what_they_found() -> None:
    expect = Expect(called=["researcher"], order=["writer", "researcher"], only=True, max_cost_usd=0.01)
    checks = check(expect, status="complete", answer="x", routed=["researcher", "writer"], handoffs=2, cost=None)
    found = {c.what: (c.passed, c.detail) for c in checks}
    assert found["order"] == (False, "first calls in the order researcher → writer (expected writer → researcher)")
    assert found["only"] == (False, "also called: writer")
    assert found["max_cost_usd"] == (True, "not checked: no call of this backend has a price")
    single = check(expect, status="failed", answer="", routed=None, handoffs=0, cost=0.02)
    assert {c.what for c in single} == {"status", "max_cost_usd"}  # routing does not apply to one agent
    assert not any(c.passed for c in single)
