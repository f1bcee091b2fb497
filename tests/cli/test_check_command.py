"""Wrong input an operator or a library user gives, said for what it is where it is given: an empty run id to
`mcp-team trace`, a wrong provider or processor to `use_tracing`, and a team file whose member's API key
variable is unset to `mcp-team check` (which passed it, and `run` then stopped on it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_team import use_tracing
from support import cli_here

pytestmark = [pytest.mark.process]


def test_trace_with_an_empty_run_id_says_the_id_is_empty(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    for run_id in ("", "  "):
        shown = cli_here("trace", run_id, "--dir", "traces", cwd=tmp_path)
        assert (shown.returncode, shown.stdout) == (2, ""), shown
        assert shown.stderr == (
            "mcp-team: error: the run id is empty; give a run id (see mcp-team runs) or the path of a trace file\n"
        )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"provider": TracerProvider}, "provider= is the class TracerProvider, not a tracer provider; pass an "
         "instance, e.g. TracerProvider()"),
        ({"provider": "jaeger"}, "provider= must be an OpenTelemetry TracerProvider (e.g. "
         "opentelemetry.sdk.trace.TracerProvider()), got str"),
        ({"processors": [InMemorySpanExporter()]}, "processors[0] is an exporter (InMemorySpanExporter); wrap it: "
         "SimpleSpanProcessor(exporter) or BatchSpanProcessor"),
        ({"processors": [SimpleSpanProcessor]}, "processors[0] is the class SimpleSpanProcessor; pass an instance, "
         "e.g. SimpleSpanProcessor(exporter)"),
        ({"processors": [InMemorySpanExporter]}, "processors[0] is the exporter class InMemorySpanExporter; pass a "
         "processor with one: SimpleSpanProcessor(InMemorySpanExporter())"),
        ({"processors": SimpleSpanProcessor(InMemorySpanExporter())}, "processors= takes a list of span processors, "
         "e.g. processors=[SimpleSpanProcessor(exporter)], got one SimpleSpanProcessor; put it in a list"),
        ({"processors": [SimpleSpanProcessor(InMemorySpanExporter()), 3]}, "processors[1] is int, not a span "
         "processor"),
    ],
)  # fmt: skip
def test_use_tracing_refuses_a_wrong_provider_or_processor_at_the_call(given: dict[str, Any], said: str) -> None:
    """Refused by the call itself, before any `with` (the processors were taken, and the run failed later,
    at its first span; a class as provider failed with Python's own words)."""
    with pytest.raises(TypeError) as refused:
        use_tracing(**given)
    assert str(refused.value) == f"use_tracing: {said}"


def test_use_tracing_still_takes_a_provider_and_processors() -> None:
    memory = InMemorySpanExporter()
    with use_tracing(TracerProvider(), processors=(SimpleSpanProcessor(memory),)) as provider:
        assert isinstance(provider, TracerProvider)


TEAM = """
[[specialists]]
name = "researcher"
description = "Finds facts."
prompt = "Find facts."
model = "openai:qwen2.5:7b"
base_url = "http://127.0.0.1:11434/v1"
api_key_env = "LOCAL_LLM_KEY"
"""


def test_check_says_a_members_api_key_variable_is_unset(tmp_path: Path) -> None:
    unset = "LOCAL_LLM_KEY_UNSET_HERE"  # not LOCAL_LLM_KEY: the machine running the tests might set that one
    (tmp_path / "team.toml").write_text(TEAM.replace("LOCAL_LLM_KEY", unset))
    check = cli_here("check", cwd=tmp_path, OPENAI_API_KEY="sk-test")
    assert check.returncode == 0, check  # a warning: the file is valid, the key may be set where it runs
    assert "openai:qwen2.5:7b at http://127.0.0.1:11434/v1" in check.stdout  # the team is still shown
    assert check.stderr == (
        f"mcp-team: warning: specialist 'researcher': its API key variable {unset} is not set, so run and serve "
        f"would stop on it; export {unset}=<its key>, or remove api_key_env from its entry\n"
    )
    # What `run` says of it, for the same file: check found what run stops on.
    run = cli_here("run", "--ephemeral", "Research bees", cwd=tmp_path, OPENAI_API_KEY="sk-test")
    assert run.returncode == 2 and f"its API key variable {unset} is not set" in run.stderr, run

    keyed = cli_here("check", cwd=tmp_path, OPENAI_API_KEY="sk-test", **{unset: "sk-local"})
    assert (keyed.returncode, keyed.stderr) == (0, ""), keyed
    # On the offline model no key is read: nothing to say.
    offline = cli_here("check", cwd=tmp_path, MCP_TEAM_MODEL="offline")
    assert (offline.returncode, offline.stderr) == (0, ""), offline
