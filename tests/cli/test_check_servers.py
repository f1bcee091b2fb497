"""Knowing the server (issue 33): `mcp-team check` asks an OpenAI-compatible server of one's own which model names
it serves, and with `--probe` whether its tool calls come back native; `run` warns once at its start when a name
is not served; a model that writes its calls as text runs through the command as through the library.

Through the `mcp-team` command against the fake Chat Completions server (tests/support/fake_openai_api.py).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mcp_team.llm import ModelRequest, ModelResponse, ToolUseBlock
from support import cli_here
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.process]


def test_check_says_what_the_server_serves_and_names_the_fix_for_a_name_it_does_not() -> None:
    with FakeOpenAIAPI(brain=offline_brain, models=["qwen2.5:7b", "llama3.1"]) as api:
        check = cli_here("check", OPENAI_BASE_URL=api.base_url)  # no model named: OpenAI's default names
        url = api.base_url
    assert check.returncode == 0, check.stderr
    assert f"server at {url}: serves qwen2.5:7b, llama3.1" in check.stdout
    warnings = [line for line in check.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2, check.stderr  # one per name, from what the server said, not guessed as well
    assert "does not serve 'gpt-4o', the model of the supervisor" in warnings[0]
    assert "does not serve 'gpt-4o-mini', the model of the specialists" in warnings[1]
    for warning in warnings:
        assert "--model openai:qwen2.5:7b" in warning and "MCP_TEAM_MODEL=openai:qwen2.5:7b" in warning
    assert "a default name of the provider's own API" not in check.stderr


def test_check_gives_no_false_warning_for_a_server_that_answers_any_name() -> None:
    """llama.cpp's server lists the model it loaded and answers whatever name is asked for."""
    with FakeOpenAIAPI(brain=offline_brain, models=["qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"], any_name=True) as api:
        check = cli_here("check", OPENAI_BASE_URL=api.base_url)
    assert check.returncode == 0, check.stderr
    assert "it answers any model name" in check.stdout
    assert "warning" not in check.stderr and "would fail" not in check.stderr


def test_check_with_a_named_model_the_server_serves_is_quiet() -> None:
    with FakeOpenAIAPI(brain=offline_brain, models=["qwen2.5:7b"]) as api:
        check = cli_here("check", "--model", "openai:qwen2.5:7b", OPENAI_BASE_URL=api.base_url)
    assert check.returncode == 0 and "warning" not in check.stderr, check.stderr
    assert "supervisor (and planner): openai:qwen2.5:7b" in check.stdout


def adds(request: ModelRequest) -> ModelResponse:
    """A model that calls the probe's `add` tool, as asked."""
    return ModelResponse(content=[ToolUseBlock(id="c1", name="add", input={"a": 17, "b": 25})], model="m")


def test_check_probe_learns_whether_tool_calls_come_back_native_or_as_text() -> None:
    with FakeOpenAIAPI(brain=adds, models=["qwen"], any_name=True, text_calls="fenced") as api:
        texting = cli_here("check", "--probe", "--model", "openai:qwen", OPENAI_BASE_URL=api.base_url)
        asked = len(api.requests)
    assert texting.returncode == 0, texting.stderr
    assert "qwen writes its tool calls as text" in texting.stdout and "reads and runs them" in texting.stdout
    assert asked == 1  # one test call: the probe costs a call, so only --probe makes it
    with FakeOpenAIAPI(brain=adds, models=["gpt-x"]) as api:
        native = cli_here("check", "--probe", "--model", "openai:gpt-x", OPENAI_BASE_URL=api.base_url)
        plain = cli_here("check", "--model", "openai:gpt-x", OPENAI_BASE_URL=api.base_url)
        after = len(api.requests)
    assert "gpt-x returns native tool calls" in native.stdout, native.stdout
    assert "tool calls:" not in plain.stdout and after == 1  # no --probe: no call


def test_check_says_when_a_server_cannot_be_asked_and_falls_back_to_the_guess() -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:  # no GET /v1/models: a 404
        check = cli_here("check", OPENAI_BASE_URL=api.base_url)
        url = api.base_url
    assert check.returncode == 0, check.stderr
    assert f"server at {url}: could not ask which models it serves" in check.stdout
    assert "may not serve" in check.stderr and "--model openai:NAME" in check.stderr
    assert "MCP_TEAM_MODEL=openai:NAME" in check.stderr and "would fail" not in check.stderr


def test_run_warns_once_at_its_start_of_a_name_the_server_does_not_serve() -> None:
    with FakeOpenAIAPI(brain=offline_brain, models=["qwen2.5:7b"]) as api:
        run = cli_here("run", "--ephemeral", "--model", "openai:mistral", "Write a haiku about bees",
                       OPENAI_BASE_URL=api.base_url)  # fmt: skip
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, run.stderr
    assert "does not serve 'mistral'" in warnings[0] and "--model openai:qwen2.5:7b" in warnings[0]
    assert run.stderr.index("warning") < run.stderr.index("→ h1")  # before the run's work
    with FakeOpenAIAPI(brain=offline_brain, models=["qwen"], any_name=True) as api:
        quiet = cli_here("run", "--ephemeral", "--model", "openai:mistral", "Write a haiku about bees",
                         OPENAI_BASE_URL=api.base_url)  # fmt: skip
    assert "warning" not in quiet.stderr, quiet.stderr


def test_run_on_a_model_that_writes_its_calls_as_text_completes_and_says_what_was_read() -> None:
    request = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."
    with FakeOpenAIAPI(brain=offline_brain, text_calls="tagged") as api:
        run = cli_here("run", "--ephemeral", "--json", "--model", "openai:qwen", request, OPENAI_BASE_URL=api.base_url)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "complete" and result["handoffs"]
    assert all(h["text_call"] for h in result["handoffs"])
    with FakeOpenAIAPI(brain=offline_brain, text_calls="tagged") as api:
        native = cli_here("run", "--ephemeral", "--json", "--model", "openai:qwen", request,
                          OPENAI_BASE_URL=api.base_url, MCP_TEAM_TOOL_CALLS="native")  # fmt: skip
    result = json.loads(native.stdout)
    assert result["status"] == "failed" and not result["handoffs"]  # nothing read: the calls went back, unrun
    assert {f["kind"] for f in result["failures"]} == {"malformed_tool_call"}
    assert not any(f["recovered"] for f in result["failures"])  # they ended the run: not recovered


@contextmanager
def hanging_up() -> Iterator[str]:
    """A server on 127.0.0.1 that takes every connection and closes it at once: reached, but never answering (a
    port that refuses is said without retries, see tests of `llm.listening`)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, _ = listener.accept()
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


def test_a_failed_call_to_a_local_server_has_an_unknown_cost_and_says_its_attempts_once() -> None:
    with hanging_up() as url:
        run = cli_here("run", "--ephemeral", "--model", "openai:qwen", "hello", OPENAI_BASE_URL=url,
                       MCP_TEAM_MAX_RETRIES="1")  # fmt: skip
    assert "cost unknown" in run.stderr and "$0.0000" not in run.stderr
    reached = next(line for line in run.stdout.splitlines() if "could not reach" in line)
    assert reached.count("attempt") == 1 and "gave up after 2 attempts" in reached, reached
