"""`mcp-team eval --record DIR` then `--model replay:DIR`, as a user proving a team in CI does it: a case added
since the recordings were made, a prompt changed in the team file, and an eval re-recording over good
recordings that is interrupted with Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mcp_team.errors import ConfigError
from mcp_team.evals import assert_replays
from mcp_team.handoffs import RunSettings
from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here

pytestmark = [pytest.mark.process]

SUITE = """\
name = "small"

[[cases]]
name = "bees"
request = "Research bees and write a haiku"
expect.called = ["researcher", "writer"]

[[cases]]
name = "sum"
request = "Calculate 2+2"
expect.contains = ["= 4"]
"""

NEW_CASE = """
[[cases]]
name = "fizz"
request = "Implement fizzbuzz in Python"
expect.called = ["coder"]
"""


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    """A suite, and its cases recorded on the offline model."""
    suite, recordings = tmp_path / "suite.toml", tmp_path / "recordings"
    suite.write_text(SUITE)
    proc = cli_here("eval", str(suite), "--model", "offline", "--record", str(recordings), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in recordings.iterdir()) == ["bees.jsonl", "sum.jsonl"]
    return suite, recordings


def test_a_case_added_since_the_recordings_fails_alone_saying_how_to_record_it(recorded: tuple[Path, Path]) -> None:
    suite, recordings = recorded
    suite.write_text(SUITE + NEW_CASE)

    proc = cli_here("eval", str(suite), "--model", f"replay:{recordings}", "--quiet")

    assert proc.returncode == 1, proc.stderr
    assert "ExceptionGroup" not in proc.stderr and "Traceback" not in proc.stderr
    assert "small: 2/3 cases pass" in proc.stdout  # the recorded cases still replay and are reported
    out = " ".join(proc.stdout.split())  # as the terminal's width wrapped it
    assert "✗ fizz: ConfigError: " in out and "fizz.jsonl: no such recording (make one with " in out
    assert "mcp-team eval SUITE --record DIR" in out and "mcp-team run --record" not in out


def test_a_changed_prompt_names_the_change_and_the_eval_way_to_record_again(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    suite, recordings = recorded
    team = tmp_path / "team.toml"
    assert cli_here("init", str(team)).returncode == 0
    team.write_text(team.read_text().replace("Be concise: bullet points over prose.", "Be thorough."))

    proc = cli_here("eval", str(suite), "--model", f"replay:{recordings}", "--team", str(team), "--quiet")

    assert proc.returncode == 1, proc.stderr
    assert "small: 1/2 cases pass" in proc.stdout  # only the case that asks the researcher diverges
    out = " ".join(proc.stdout.split())  # as the terminal's width wrapped it
    assert "✗ bees: Divergence: the run diverged from the recording" in out
    assert "the system prompt" in out and "+Gather the facts the task needs." in out
    assert "as unverified. Be thorough." in out
    assert "mcp-team eval SUITE --record DIR" in out and "mcp-team run --record" not in out


def test_a_baseline_that_could_not_run_says_so_instead_of_scoring_0_percent(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    suite, recordings = recorded  # the team's runs only: no single-agent recordings

    proc = cli_here(
        "eval", str(suite), "--model", f"replay:{recordings}", "--baseline", "single-agent", "--quiet",
        "--report", str(tmp_path / "report.json"),
    )  # fmt: skip

    out = " ".join(proc.stdout.split())  # as the terminal's width wrapped it
    assert "could not run" in out
    [row] = [line for line in proc.stdout.splitlines() if line.startswith("│ single agent ")]
    assert row.split("│")[-2].strip() == "2"
    assert "single agent: 2 run(s) could not run, e.g. bees: ConfigError: " in out
    assert "bees.single-agent.jsonl: no such recording" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["baseline"]["totals"]["errors"] == 2 and report["totals"]["errors"] == 0


def test_ctrl_c_while_re_recording_leaves_the_good_recordings_whole(recorded: tuple[Path, Path]) -> None:
    suite, recordings = recorded
    before = _state(recordings)

    code, err = _stop_while_recording(suite, recordings, signal.SIGINT)

    assert code == 130, err
    assert _state(recordings) == before  # nothing half-written in their place, no temporary file left
    replay = cli_here("eval", str(suite), "--model", f"replay:{recordings}", "--quiet")
    assert replay.returncode == 0, replay.stdout


def test_an_eval_killed_while_recording_leaves_the_recordings_and_the_next_one_tidies_up(
    recorded: tuple[Path, Path],
) -> None:
    suite, recordings = recorded
    before = _state(recordings)

    # SIGKILL: a SIGTERM (a CI job cancelled) is taken as Ctrl-C is now, its temporary files removed
    code, err = _stop_while_recording(suite, recordings, signal.SIGKILL)

    assert code == -signal.SIGKILL, err
    assert {name: data for name, data in _state(recordings).items() if not name.startswith(".")} == before
    again = cli_here("eval", str(suite), "--model", "offline", "--record", str(recordings), "--quiet")
    assert again.returncode == 0, again.stdout
    assert sorted(_state(recordings)) == sorted(before)  # what the killed eval left is gone


def _stop_while_recording(suite: Path, recordings: Path, sig: signal.Signals) -> tuple[int, str]:
    """Re-record `suite` into `recordings` in a process of its own, and send it `sig` while its runs are in
    flight: its exit code and stderr."""
    before = _state(recordings)
    # Every model call takes far longer than the test: both cases are in flight when the signal comes.
    args = [MCP_TEAM, "eval", str(suite), "--model", "offline", "--offline-latency-ms", "600000"]
    proc = subprocess.Popen(
        [*args, "--record", str(recordings), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C reaches it
    )
    try:
        waited = time.monotonic() + HANG_GUARD
        while _state(recordings) == before:  # until the re-recording has started (whatever file it writes)
            assert proc.poll() is None and time.monotonic() < waited, "the eval never started recording"
            time.sleep(0.05)
        time.sleep(0.3)  # the other case's run starts too
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def _state(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_record_into_a_file_says_it_is_not_a_directory(tmp_path: Path) -> None:
    suite, target = tmp_path / "suite.toml", tmp_path / "recordings"
    suite.write_text(SUITE)
    target.write_text("not a directory\n")

    proc = cli_here("eval", str(suite), "--model", "offline", "--record", str(target), "--quiet")

    assert proc.returncode == 1
    out = " ".join(proc.stdout.split())  # as the terminal's width wrapped it
    assert f"✗ bees: ConfigError: {target}: cannot record there (a file, not a directory)" in out
    assert ".partial" not in out and target.read_text() == "not a directory\n"


def test_a_recording_with_settings_of_another_version_says_so(tmp_path: Path) -> None:
    path = tmp_path / "bees.jsonl"
    made = cli_here("run", "--model", "offline", "--record", str(path), "--quiet", "Research bees")
    assert made.returncode == 0, made.stderr
    header, *rest = path.read_text().splitlines()
    data = json.loads(header)
    data["run"]["settings"]["speculative"] = True  # a setting a later version added
    path.write_text("\n".join([json.dumps(data), *rest]) + "\n")

    with pytest.raises(ConfigError) as raised:
        assert_replays(path)

    message = str(raised.value)
    assert message.startswith(f"{path}: the recorded run settings are not ones this mcp-team reads (speculative: ")
    assert "recorded by another version?" in message and "\n" not in message
    assert_replays(path, settings=RunSettings())  # the way out it names
