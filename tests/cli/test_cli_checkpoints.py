"""A terminal user of `mcp-team run --checkpoint plan`: the question on a real terminal (a pty), answered, left
unanswered until the checkpoint's timeout, cut short with Ctrl-C, or ended with Ctrl-D; the process ends
without anyone pressing Enter."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.process]

REQUEST = "Research bees and write a short report"
PROMPT = b"[a]pprove, [r]evise or reject ([x])? "


@contextmanager
def on_a_terminal(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`mcp-team run --json --mode planned --checkpoint plan ARGS REQUEST` with stdin on a pty; the pty's
    other end, to type on. Closed (the person still there, never typing) only once the process ended."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [MCP_TEAM, "run", "--json", "--mode", "planned", "--checkpoint", "plan", *args, REQUEST],
        stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(MCP_TEAM_MODEL="offline"),
    )  # fmt: skip
    os.close(terminal)
    try:
        yield proc, controller
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        os.close(controller)


def until_asked(proc: subprocess.Popen[bytes]) -> bytes:
    """What the run wrote on stderr up to its question."""
    assert proc.stderr is not None
    seen, deadline = b"", time.monotonic() + HANG_GUARD
    while PROMPT not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, f"hang guard: never asked: {seen!r}"
        if select.select([proc.stderr], [], [], 0.1)[0]:
            seen += os.read(proc.stderr.fileno(), 4096)
    return seen


def ended(proc: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    """The exit code, stdout and the rest of stderr, once the process ended by itself (nobody pressed Enter)."""
    try:
        out, err = proc.communicate(timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        raise AssertionError("hang guard: the run did not end while its terminal waited for a line") from None
    return proc.returncode, out.decode(), err.decode()


def test_ctrl_c_at_the_prompt_ends_the_run_without_waiting_for_enter() -> None:
    # The prompt read stdin in a worker thread that no cancel reaches: after Ctrl-C the run said "cancelled" and
    # then the process hung until the person pressed Enter.
    with on_a_terminal() as (proc, _):
        until_asked(proc)
        proc.send_signal(signal.SIGINT)
        code, out, err = ended(proc)
    assert code == 130, err
    assert json.loads(out)["status"] == "cancelled"
    assert "Traceback" not in err


def test_the_checkpoint_timeout_ends_a_run_nobody_answers_on_the_terminal(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    subprocess.run([MCP_TEAM, "init", str(team)], check=True, env=clean_env(), timeout=HANG_GUARD)
    team.write_text(team.read_text().replace("[supervisor]\n", "[supervisor]\ncheckpoint_timeout = 1\n", 1))
    with on_a_terminal("--team", str(team)) as (proc, _):
        until_asked(proc)
        code, out, err = ended(proc)
    result = json.loads(out)
    assert (code, result["status"]) == (130, "cancelled"), err
    assert "nobody answered checkpoint 'plan' within 1 s" in result["answer"]
    assert [(c["action"], c["answered_by"]) for c in result["checkpoints"]] == [("timeout", "timeout")]


def test_a_revise_without_feedback_is_asked_again_not_spent_as_a_round() -> None:
    # An empty "what should change?" re-planned with nothing to change: a model call and one of the
    # max_checkpoint_rounds spent, where a client's form and answer_checkpoint both refuse such a revise.
    with on_a_terminal() as (proc, controller):
        until_asked(proc)
        os.write(controller, b"r\n\nr\nalso write the python code for it\na\n")
        code, out, err = ended(proc)
    assert code == 0, err
    assert "with revise, say what should change" in err
    result = json.loads(out)
    assert [(c["action"], c["feedback"]) for c in result["checkpoints"]] == [
        ("revise", "also write the python code for it"),
        ("approve", ""),
    ]


def test_ctrl_d_at_the_prompt_is_a_reject() -> None:
    # It was "nobody can be asked": the run failed telling the person to answer "on a terminal", where they were,
    # and under checkpoint_policy = "approve" their Ctrl-D went on as approved.
    with on_a_terminal() as (proc, controller):
        until_asked(proc)
        os.write(controller, b"\x04")
        code, out, err = ended(proc)
    result = json.loads(out)
    assert (code, result["status"]) == (130, "cancelled"), err
    assert [(c["action"], c["answered_by"]) for c in result["checkpoints"]] == [("reject", "person")]
    assert "rejected at checkpoint 'plan': the input ended (Ctrl-D) at the prompt" in result["answer"]


def test_two_checkpoints_reached_at_once_are_asked_one_after_the_other() -> None:
    # The planned run's researcher and analyst tasks are independent: both reach their `before:` checkpoint at
    # once. The second question's read of the terminal failed (anyio's BusyResourceError) and the run was lost.
    controller, terminal = pty.openpty()
    args = ["run", "--json", "--ephemeral", "--mode", "planned", "--checkpoint", "before:researcher",
            "--checkpoint", "before:analyst", "Research bees and analyze 12*(3+4)/2"]  # fmt: skip
    proc = subprocess.Popen([MCP_TEAM, *args], stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env(MCP_TEAM_MODEL="offline"))  # fmt: skip
    os.close(terminal)
    try:
        asked = [until_asked(proc)]
        os.write(controller, b"a\n")
        asked.append(until_asked(proc))
        os.write(controller, b"a\n")
        code, out, err = ended(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(controller)
    assert code == 0, (code, err)
    questions = sorted(line for said in asked for line in said.decode().splitlines() if line.startswith("── "))
    assert questions == ["── checkpoint before:analyst ──", "── checkpoint before:researcher ──"], asked
    result = json.loads(out)
    assert result["status"] == "complete", result
    assert sorted((c["name"], c["action"]) for c in result["checkpoints"]) == [
        ("before:analyst", "approve"), ("before:researcher", "approve")]  # fmt: skip


def test_a_run_started_with_stdin_closed_is_decided_by_the_policy() -> None:
    # Under systemd or some CI runners stdin is closed: `sys.stdin` is None, and asking crashed the run
    # ("unexpected AttributeError"); it is not a terminal, so the checkpoint policy decides (by default: fail).
    proc = subprocess.Popen([MCP_TEAM, "run", "--json", "--ephemeral", "--mode", "planned", "--checkpoint", "plan",
                             REQUEST], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env(MCP_TEAM_MODEL="offline"),
                            preexec_fn=lambda: os.close(0))  # fmt: skip
    code, out, err = ended(proc)
    assert code == 1 and "Traceback" not in err and "unexpected" not in err, (code, err)  # a failed run's status
    result = json.loads(out)
    (failure,) = result["failures"]
    assert result["status"] == "failed" and failure["kind"] == "checkpoint_unanswerable", result
    assert "not attached to a terminal" in failure["reason"], failure
