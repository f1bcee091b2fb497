"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/conformance/package.json) against `mcp-team serve --http` on the offline model.

The suite connects as a client, runs one scenario after another and writes each scenario's checks to
`<out>/server-<scenario>-<timestamp>/checks.json` (each check: id, status SUCCESS | FAILURE | WARNING |
INFO, errorMessage). `--suite all` selects every server scenario, `--spec-version` the ones a revision
has; we run it once per revision the server speaks (2025-11-25 and 2026-07-28) and judge every scenario
here, one test each, against `SCENARIOS`:

- `PASS`: every check that applies is SUCCESS or INFO (a WARNING, the suite's word for a broken SHOULD,
  counts as a failure);
- `NOT_APPLICABLE`: the scenario exercises the suite's own fixture tools, prompts or resources
  (`test_simple_text`, `test://static-text`, ...) or an optional capability mcp-team does not offer;
  only its `wire-schema-valid` check applies (every message the server sent is valid for the revision);
- `EXPECTED_FAILURE`: it applies and fails today, for the reason given and the point of issue 11 that
  fixes it (a strict xfail: once it passes, the test says so and the entry moves to `PASS`).

Some scenarios are partly fixture-bound: `applies` then lists the checks that apply. The suite and the
Node 22 it needs are installed by `make test` (target `conformance-suite`) into .cache/conformance.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from support import clean_env, serve_http
from support.conformance import NODE, SUITE, SUITE_TIMEOUT, install_suite

pytestmark = [pytest.mark.process, pytest.mark.conformance]

CONFORMANCE = SUITE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REVISIONS = ("2025-11-25", "2026-07-28")

Verdict = Literal["pass", "n/a", "xfail"]


@dataclass(frozen=True)
class Expect:
    verdict: Verdict
    reason: str = ""
    applies: frozenset[str] | None = None  # None: every check of the scenario applies


def PASS(*, applies: set[str] | None = None, reason: str = "") -> Expect:
    return Expect("pass", reason, frozenset(applies) if applies is not None else None)


def NOT_APPLICABLE(reason: str) -> Expect:
    return Expect("n/a", reason, frozenset({"wire-schema-valid"}))


def EXPECTED_FAILURE(reason: str, *, applies: set[str] | None = None) -> Expect:
    return Expect("xfail", reason, frozenset(applies) if applies is not None else None)


def _fixture_tool(*names: str) -> Expect:
    return NOT_APPLICABLE(f"calls the suite's fixture tool(s) {', '.join(names)}, which a team server does not have")


def _fixture_prompt(name: str) -> Expect:
    return NOT_APPLICABLE(f"gets the suite's fixture prompt {name}")


def _fixture_resource(uri: str) -> Expect:
    return NOT_APPLICABLE(f"reads the suite's fixture resource {uri}")


_INPUT_REQUIRED_FIXTURES = "calls the suite's fixture tools test_input_required_result_* (and their fixture prompt)"

# Every server scenario of the pinned suite, for the revisions it runs on. A scenario the suite adds or
# drops in a new version fails `test_the_suite_runs_exactly_the_listed_scenarios` until it is listed here.
SCENARIOS: dict[str, Expect] = {
    "server-initialize": PASS(),
    "server-session-lifecycle": PASS(),
    "server-stateless": PASS(
        reason="six checks need fixture tools: test_missing_capability (two), test_trigger_tool_change, "
        "test_trigger_prompt_change, test_streaming_elicitation and test_logging_tool (the last two passed only "
        "while an unknown tool answered with a result instead of the spec's -32602; "
        "tests/server/test_client_mistakes.py "
        "checks that no log is sent without the logLevel opt-in)",
        applies={
            "sep-2575-request-meta-invalid-missing-meta",
            "sep-2575-http-server-meta-invalid-400",
            "sep-2575-request-meta-invalid-missing-protocol-version",
            "sep-2575-request-meta-invalid-missing-client-capabilities",
            "sep-2575-request-meta-client-info-optional",
            "sep-2575-server-implements-discover",
            "sep-2575-server-identifies-in-result-meta",
            "sep-2575-server-declares-prompts-in-discover",
            "sep-2575-discover-capabilities-match-handlers",
            "sep-2575-server-unsupported-version-error",
            "sep-2575-http-server-unsupported-version-400",
            "sep-2575-http-server-header-mismatch-400",
            "sep-2575-http-server-method-not-found-404-initialize",
            "sep-2575-http-server-method-not-found-404-ping",
            "sep-2575-http-server-method-not-found-404-logging-setlevel",
            "sep-2575-http-server-method-not-found-404-resources-subscribe",
            "sep-2575-http-server-method-not-found-404-resources-unsubscribe",
            "sep-2575-http-server-method-not-found-404",
            "sep-2575-server-sends-subscription-ack",
            "sep-2575-server-tags-subscription-id",
            "sep-2575-server-honors-notification-filter",
            "sep-2575-http-server-error-jsonrpc-id",
        },
    ),
    "logging-set-level": PASS(),
    "ping": PASS(),
    "completion-complete": NOT_APPLICABLE(
        "completions are an optional capability mcp-team does not declare; the scenario completes an "
        "argument of the fixture prompt test_prompt_with_arguments"
    ),
    "tools-list": PASS(),
    "tools-call-simple-text": _fixture_tool("test_simple_text"),
    "tools-call-image": _fixture_tool("test_image_content"),
    "tools-call-audio": _fixture_tool("test_audio_content"),
    "tools-call-embedded-resource": _fixture_tool("test_embedded_resource"),
    "tools-call-mixed-content": _fixture_tool("test_multiple_content_types"),
    "tools-call-with-logging": _fixture_tool("test_tool_with_logging"),
    "tools-call-error": _fixture_tool("test_error_handling"),
    "tools-call-with-progress": _fixture_tool("test_tool_with_progress"),
    "tools-call-sampling": _fixture_tool("test_sampling"),
    "tools-call-elicitation": _fixture_tool("test_elicitation"),
    "json-schema-2020-12": _fixture_tool("json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": _fixture_tool("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _fixture_tool("test_elicitation_sep1330_enums"),
    # The scenario calls the fixture tool test_reconnection (which closes its stream mid-call); the checks
    # on the SSE stream itself apply to every POST stream: a priming event with an id, and `retry`.
    "server-sse-polling": PASS(
        reason="the resumption checks need the fixture tool test_reconnection; "
        "tests/server/test_resumable_http.py resumes a real run_team instead",
        applies={"server-sse-priming-event", "server-sse-retry-field"},
    ),
    "server-sse-multiple-streams": PASS(),
    "resources-list": PASS(),
    "resources-read-text": _fixture_resource("test://static-text"),
    "resources-read-binary": _fixture_resource("test://static-binary"),
    "resources-templates-read": _fixture_resource("test://template/{id}/data"),
    "resources-subscribe": NOT_APPLICABLE(
        "the scenario subscribes to the suite's fixture resource test://static-text; mcp-team declares "
        "resources.subscribe for team://runs (and, durable, team://runs/{id}), tested in "
        "tests/server/test_runs_listing_updates.py and tests/server/test_run_tools.py"
    ),
    "resources-unsubscribe": NOT_APPLICABLE(
        "the scenario unsubscribes from the fixture resource test://static-text; subscriptions on "
        "team://runs and team://runs/{id} are tested in tests/server/test_runs_listing_updates.py and "
        "tests/server/test_run_tools.py"
    ),
    "sep-2164-resource-not-found": PASS(),
    "prompts-list": PASS(),
    "prompts-get-simple": _fixture_prompt("test_simple_prompt"),
    "prompts-get-with-args": _fixture_prompt("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _fixture_prompt("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _fixture_prompt("test_prompt_with_image"),
    "dns-rebinding-protection": PASS(),
    "caching": PASS(),
    "http-header-validation": PASS(),
    "http-custom-header-server-validation": NOT_APPLICABLE(
        "SEP-2243 custom headers: no mcp-team tool declares x-mcp-header parameters"
    ),
    "input-required-result-basic-elicitation": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-basic-sampling": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-basic-list-roots": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-request-state": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-multiple-input-requests": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-multi-round": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-missing-input-response": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-non-tool-request": NOT_APPLICABLE(
        _INPUT_REQUIRED_FIXTURES + "; its prompts/get of an unknown prompt answering -32603 is issue 11's "
        "prompts/get point, tested in tests/server/test_client_mistakes.py"
    ),
    "input-required-result-result-type": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-unsupported-methods": PASS(),
    "input-required-result-tampered-state": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-capability-check": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-ignore-extra-params": NOT_APPLICABLE(_INPUT_REQUIRED_FIXTURES),
    "input-required-result-validate-input": PASS(
        reason="sep-2322-error-on-protocol-error retries a call of a fixture tool",
        applies={"sep-2322-validate-input-responses", "wire-schema-valid"},
    ),
}

# The suite's scenarios of the tasks extension (SEP-2663, `[extension]` in `conformance list`): not part of
# `--suite all`, so each runs on its own (`--scenario`, at 2026-07-28, the revision the extension is for).
# mcp-team's task tool is run_team, so most checks need the suite's fixture tools (greet, slow_compute,
# failing_job, protocol_error_job, confirm_delete, multi_input); tests/server/test_tasks.py checks the same rules
# on run_team (creation, tasks/get inlining the result, a tool error as completed + isError, the cancel ack,
# strong consistency, -32602 for an unknown task). What applies here: the extension's negotiation and the
# methods' dispatch.
_TASK_FIXTURES = "needs the suite's fixture tools; tests/server/test_tasks.py checks the same rules on run_team"
TASK_SCENARIOS: dict[str, Expect] = {
    "tasks-capability-negotiation": PASS(
        reason="the sync fall-through and the per-request opt-in call the fixture tool slow_compute "
        "(tests/server/test_tasks.py: a client without the extension gets plain calls and -32021)",
        applies={"tasks-extension-advertised", "sep-2663-tasks-methods-non-declaring", "wire-schema-valid"},
    ),
    "tasks-dispatch-and-envelope": PASS(
        reason="task creation, the legacy task param and resultType checks call fixture tools",
        applies={
            "sep-2663-tasks-result-removed-method-not-found",
            "tasks-removed-tasks-list",
            "sep-2663-tasks-get-invalid-task-id-32602",
            "wire-schema-valid",
        },
    ),
    "tasks-request-headers": PASS(
        reason="the Mcp-Name checks on tasks/get need a task of the fixture tool slow_compute",
        applies={"tasks-headers-reject-mismatched-method", "wire-schema-valid"},
    ),
    "tasks-lifecycle": NOT_APPLICABLE(_TASK_FIXTURES),
    "tasks-wire-fields": NOT_APPLICABLE(_TASK_FIXTURES),
    "tasks-request-state-removal": NOT_APPLICABLE(_TASK_FIXTURES),
    "tasks-mrtr-input": NOT_APPLICABLE("a run never asks its client for input (input_required); " + _TASK_FIXTURES),
    "tasks-mrtr-composition": NOT_APPLICABLE("calls the suite's fixture tool test_tool_with_task"),
    "tasks-required-task-error": NOT_APPLICABLE(
        "no mcp-team tool requires a task (run_team's task support is optional); calls the fixture failing_job"
    ),
    "tasks-status-notifications": Expect(
        "n/a",
        "the suite skips it (pending its subscriptions/listen rewrite); mcp-team sends none on 2026-07-28",
        frozenset(),
    ),
}

# Which scenarios the pinned suite runs on each revision (`conformance list --server --spec-version`,
# `--suite all`).
BOTH = {
    "completion-complete", "tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio",
    "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-error", "tools-call-with-progress",
    "json-schema-2020-12", "server-sse-multiple-streams", "resources-list", "resources-read-text",
    "resources-read-binary", "resources-templates-read", "prompts-list", "prompts-get-simple",
    "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
}  # fmt: skip
ONLY_2025 = {
    "server-initialize", "server-session-lifecycle", "logging-set-level", "ping", "tools-call-with-logging",
    "tools-call-sampling", "tools-call-elicitation", "elicitation-sep1034-defaults", "server-sse-polling",
    "elicitation-sep1330-enums", "resources-subscribe", "resources-unsubscribe",
}  # fmt: skip
RUNS_ON = {"2025-11-25": BOTH | ONLY_2025, "2026-07-28": set(SCENARIOS) - ONLY_2025}


def _cases() -> Iterator[Any]:
    for revision in REVISIONS:
        for name in sorted(RUNS_ON[revision]):
            expect = SCENARIOS[name]
            marks = [pytest.mark.xfail(strict=True, reason=expect.reason)] if expect.verdict == "xfail" else []
            yield pytest.param(revision, name, marks=marks, id=f"{revision}-{name}")


def _run_suite(out: Path) -> dict[str, dict[str, Any]]:
    """Run every server scenario on both revisions against one `mcp-team serve --http`; checks per
    revision and scenario. The suite's runs are independent sessions, so they run at once: most of a run
    is waiting on the server, and one after another they took most of this file's time."""
    install_suite()
    suite = [str(NODE), str(CONFORMANCE)]
    with serve_http(env=clean_env(MCP_TEAM_MODEL="offline")) as base:
        runs: dict[str, tuple[list[str], Path]] = {}
        for revision in REVISIONS:
            target = out / revision
            runs[revision] = (
                [*suite, "server", "--url", f"{base}/mcp", "--suite", "all", "--spec-version", revision],
                target,
            )
        for name in TASK_SCENARIOS:
            runs[name] = ([*suite, "server", "--url", f"{base}/mcp", "--scenario", name], out / "tasks")
        procs = {
            key: subprocess.Popen(
                [*command, "-o", str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for key, (command, target) in runs.items()
        }
        listed = subprocess.run([*suite, "list", "--server"], capture_output=True, text=True, timeout=SUITE_TIMEOUT)
        for key, proc in procs.items():
            _, stderr = proc.communicate(timeout=SUITE_TIMEOUT)
            # Exit status 1 means some scenario failed: that is for the tests below to judge.
            if proc.returncode not in (0, 1) or not runs[key][1].is_dir():
                raise RuntimeError(f"the conformance suite did not run {key} ({proc.returncode}):\n{stderr}")
    results: dict[str, dict[str, Any]] = {
        key: {_scenario(d.name): json.loads((d / "checks.json").read_text()) for d in (out / key).iterdir()}
        for key in (*REVISIONS, "tasks")
    }
    results["tasks-listed"] = {"names": re.findall(r"- (tasks-[\w-]+) \[extension\]", listed.stdout)}
    return results


def _scenario(directory: str) -> str:
    match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", directory)
    assert match, directory
    return match.group(1)


@pytest.fixture(scope="session")
def suite_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The suite's checks, computed once per test session (under pytest-xdist, by whichever worker
    gets here first; the others read its results)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _run_suite(tmp_path_factory.mktemp("conformance"))
    shared = tmp_path_factory.getbasetemp().parent
    results = shared / "conformance-results.json"
    with (shared / "conformance-results.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if not results.exists():
            results.write_text(json.dumps(_run_suite(shared / "conformance")))
    loaded: dict[str, dict[str, list[dict[str, Any]]]] = json.loads(results.read_text())
    return loaded


def test_the_suite_runs_exactly_the_listed_scenarios(suite_results: dict[str, Any]) -> None:
    for revision in REVISIONS:
        assert set(suite_results[revision]) == RUNS_ON[revision], revision


def test_every_tasks_extension_scenario_is_listed(suite_results: dict[str, Any]) -> None:
    assert set(suite_results["tasks-listed"]["names"]) == set(TASK_SCENARIOS)
    assert set(suite_results["tasks"]) == set(TASK_SCENARIOS)


def _task_cases() -> Iterator[Any]:
    for name, expect in sorted(TASK_SCENARIOS.items()):
        marks = [pytest.mark.xfail(strict=True, reason=expect.reason)] if expect.verdict == "xfail" else []
        yield pytest.param("tasks", name, marks=marks, id=f"tasks-extension-{name}")


@pytest.mark.parametrize(("revision", "scenario"), [*_cases(), *_task_cases()])
def test_scenario(revision: str, scenario: str, suite_results: dict[str, Any]) -> None:
    expect = SCENARIOS[scenario] if revision != "tasks" else TASK_SCENARIOS[scenario]
    checks = suite_results[revision][scenario]
    seen = {c["id"] for c in checks}
    applies = expect.applies if expect.applies is not None else seen
    assert applies <= seen, f"checks listed but not run: {sorted(applies - seen)}"
    broken = [
        f"{c['id']}: {c['status']}: {c.get('errorMessage') or ''}"
        for c in checks
        if c["id"] in applies and c["status"] not in ("SUCCESS", "INFO")
    ]
    assert not broken, "\n".join(broken)
    if expect.verdict == "pass" and expect.applies is not None:
        # A partly applicable scenario must still have run a check of its own, not only the schema check.
        assert any(c["id"] in applies - {"wire-schema-valid"} for c in checks)
