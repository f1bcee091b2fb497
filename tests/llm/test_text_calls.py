"""Tool calls written as text (issue 33): read and run when unambiguous, refused with a reason otherwise, and
replies that are no answer never taken as final.

Unit tests of `llm.text_calls`, then whole runs through the real `openai` SDK against the fake Chat Completions
server (tests/support/fake_openai_api.py) whose model writes every call as text in one of the formats small local
models use: the supervisor, a specialist with a tool, the planner, the synthesis and the reviewer.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_team.handoffs import Team
from mcp_team.handoffs.planner import PLAN_TOOL
from mcp_team.handoffs.supervisor import handoff_tool
from mcp_team.handoffs.synthesis import FINALIZE_TOOL
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet, TextBlock, ToolDefinition
from mcp_team.llm.answers import not_an_answer
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.openai import OpenAIModel
from mcp_team.llm.text_calls import read_calls, reads_text_calls
from mcp_team.llm.wrappers import ToolCallsModel
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.specialists.verdict import parse_verdict
from mcp_team.telemetry.attributes import OP_CHAT, TEXT_TOOL_CALLS
from support.fake_api import offline_brain
from support.fake_openai_api import TEXT_FORMATS, FakeOpenAIAPI, TextFormat, calls_as_text, completion, tool_call
from support.spans import Spans

MODEL = "qwen2.5-coder-1.5b"
REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."
TOOLS: list[ToolDefinition] = [handoff_tool(s) for s in DEFAULT_TEAM] + [FINALIZE_TOOL]


@pytest.fixture(autouse=True)
def no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MCP_TEAM_MODEL", "ANTHROPIC_API_KEY", "MCP_TEAM_TOOL_CALLS"):
        monkeypatch.delenv(name, raising=False)


def local(api: FakeOpenAIAPI) -> OpenAIModel:
    return OpenAIModel(MODEL, base_url=api.base_url, max_retries=0)


def wire_calls(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool_call(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)]


# --- reading ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", TEXT_FORMATS)
def test_every_format_is_read_as_the_calls_it_writes(style: TextFormat) -> None:
    calls = [("handoff_to_researcher", {"task": "Find the transistor's history"}), ("finalize", {"answer": "x"})]
    text = calls_as_text(wire_calls(*calls), style)
    reading = read_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in reading.runnable] == calls, (text, reading)


@pytest.mark.parametrize(
    "text",
    [
        'Mistral v11: [TOOL_CALLS]finalize[ARGS]{"answer": "ok"}',
        '<function=finalize>{"answer": "ok"}</function>',
        '<function name="finalize">{"answer": "ok"}</function>',
        '```json\n{{"name": "finalize", "arguments": {"answer": "ok"}}\n```',  # only its opening brace doubled
        '{{"name": "finalize", "arguments": {"answer": "ok"}}}}',  # only its outer braces doubled (recorded)
        # Qwen3-Coder's template
        "<tool_call>\n<function=finalize>\n<parameter=answer>\nok\n</parameter>\n</function>\n</tool_call>",
        # Qwen2.5-Coder 1.5B on llama.cpp (recorded), its one parameter's value quoted
        '<tools>\n<function name="finalize">\n  <arguments>\n    <answer>\n   "ok"</answer>\n'
        "  </arguments>\n</function>\n</tools>",
        '{"type": "function", "function": {"name": "finalize", "arguments": "{\\"answer\\": \\"ok\\"}"}}',
        '{"name": "functions.finalize", "arguments": {"answer": "ok"}}',
        '{"name": "finalize", "answer": "ok"}',  # flattened: the arguments beside the name
        '<tool_call>\n{"name": "finalize", "arguments": {"answer": "ok"}}',  # Qwen without its closing tag
        '{"answer": "ok"}',  # only the arguments, which fit one offered tool alone
        # a list of calls after brackets of the reply's own (tried as JSON only where an object starts)
        'As [1] says, [offline]:\n[\n  {"name": "finalize", "arguments": {"answer": "ok"}}\n]',
        '["first", {"name": "finalize", "arguments": {"answer": "ok"}}]',  # an object in another kind of list
    ],
)
def test_the_other_shapes_of_a_call_are_read(text: str) -> None:
    assert [(c.name, c.arguments) for c in read_calls(text, TOOLS).runnable] == [("finalize", {"answer": "ok"})]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>{'name': 'finalize', 'arguments': {'answer': 'ok \\( \\d'}}</tool_call>",  # Hermes 2's literals
        "[finalize(answer='ok \\( \\d')]",  # Llama 3.2's pythonic call
    ],
)
def test_a_models_odd_escapes_are_read_without_a_python_warning(text: str) -> None:
    # Python warns of `\(` in a literal; the warning went to the server's stderr (and, with -W error, failed the
    # recorded 1.5B runs' replay).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [c.name for c in read_calls(text, TOOLS).runnable] == ["finalize"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('```json\n{"name": "handoff_to_researcher", "arguments": {"job": "x"}}\n```', "'task' is a required property"),
        ('```json\n{"name": "handoff_to_wizard", "arguments": {"task": "x"}}\n```', "handoff_to_wizard is not a tool"),
        (
            'Either {"name": "handoff_to_researcher", "arguments": {"task": "a"}} or '
            '{"name": "handoff_to_writer", "arguments": {"task": "b"}}, I am not sure.',
            "2 different calls",
        ),
        ('<tool_call>{"name": "finalize", "arguments": {"answer": "cut</tool_call>', "could not be read as JSON"),
        ('```json\n{\n  "name": "finalize",\n  "arguments": {\n    "answer": "Happy birthday, Ana! May', "as JSON"),
        # Qwen2.5-Coder 1.5B (recorded): an object for the answer, and only the outer braces doubled. Python read
        # it as a set holding a dict, and the run stopped on "unhashable type: 'dict'".
        ('{{"name": "finalize", "arguments": {"answer": {"average": 40}}}}', "{'average': 40} is not of type"),
        # the same model (recorded): a call whose answer ran on until the reply hit its token limit, unfenced
        (
            '{{"name": "finalize", "arguments": {"answer": "Happy birthday, Ana!' + " Happy birthday, Ana!" * 50,
            "could not be read as JSON",
        ),
    ],
    ids=[
        "invalid-arguments",
        "not-offered",
        "two-in-prose",
        "broken-json",
        "fence-cut-off",
        "object-answer",
        "cut-off",
    ],
)
def test_an_ambiguous_or_invalid_call_is_not_run_and_says_what_was_wrong(text: str, problem: str) -> None:
    reading = read_calls(text, TOOLS)
    assert reading.calls and not reading.runnable
    said = "; ".join(reading.problems)
    assert problem in said and "`" in said  # quoting the text it read


@pytest.mark.parametrize(
    "text",
    [
        "Bees pollinate flowers.",
        '```json\n{"name": "Ada", "born": 1815}\n```',  # an answer's own JSON
        '{"task": "x"}',  # fits every handoff tool: which one is unknown
        'To finish, a model calls {"name": "finalize", "arguments": {"answer": "ok"}} and then ' + "explains. " * 40,
    ],
    ids=["prose", "json-answer", "fits-several", "quoted-amid-an-answer"],
)
def test_an_answer_is_no_call(text: str) -> None:
    assert not read_calls(text, TOOLS).runnable


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty_answer"),
        ("<tool_response>", "empty_answer"),
        ("}", "empty_answer"),  # what a 1.5B model's supervisor left of a call, recorded as the run's answer
        (
            "I'll pass this on.\n```json\n" + json.dumps({"name": "handoff_to_x", "arguments": {}}) + "\n```",
            "tool_call_as_answer",
        ),
        ('```json\n{"tasks": [{"id": "t1", "specialist": "writer", "description": "d"}]}\n```', "tool_json_as_answer"),
        ('<tools>{{"name": "handoff_to_writer", "arguments": {{"task": "y"}}}}</tools>', "tool_call_as_answer"),
        ('{"answer": "Paris"}', "tool_json_as_answer"),
        ('```json\n{"name": "finalize", "arguments": {"answer": "The transistor was inv', "tool_call_as_answer"),
        ("Research the history of the transistor.", "echoed_request"),
    ],
)
def test_what_is_no_answer(text: str, kind: str) -> None:
    no = not_an_answer(text, "Research the history of the transistor", [*TOOLS, PLAN_TOOL])
    assert no is not None and no.kind == kind and "not an answer" in no.feedback


CONTROL = [t.name for t in [*TOOLS, PLAN_TOOL]]


@pytest.mark.parametrize(
    "text",
    [  # Qwen2.5-Coder 1.5B's final answers in the recorded suite, each once taken as the run's answer
        "To finalize the run with the complete answer to the user's request, you can use the following code:\n\n"
        '```json\n{\n  "answer": "<tool_response>"\n}\n```\n\nReplace `<tool_response>` with the JSON object '
        "returned from the `finalize` function.",
        "To continue the run with the complete answer to the user's request, we can use the handoff_to_reviewer "
        "tool to check if the review is complete.\n\n1. Hand off the task to the reviewer.\n2. Wait for the "
        "response from the reviewer.\n3. Finalize the run with the complete answer to the user's request.",
        "Call finalize(answer) once the writer is done.",
    ],
    ids=["placeholder", "handoff-tool", "finalize-call"],
)
def test_a_reply_about_the_runs_own_tools_is_no_answer(text: str) -> None:
    no = not_an_answer(text, "Write a birthday message for Ana.", [*TOOLS, PLAN_TOOL], CONTROL)
    assert no is not None and no.kind == "tool_call_as_answer" and "about the run's own tools" in no.why, no


def test_an_answer_that_uses_the_words_of_the_tools_is_an_answer() -> None:
    for text in (
        "Finalize the contract by Friday, then hand off the keys.",  # the words, not the tools
        "A handoff to the writer would help.",
        "x" * 1300 + " The team calls handoff_to_writer for prose.",  # long: an answer that mentions it
    ):
        assert not_an_answer(text, "Plan my week", TOOLS, CONTROL) is None, text[-80:]
    # A specialist's answer naming its own tool is an answer: only the supervisor's tools are control (a
    # specialist's loop names none), though the same words about a control tool are not.
    said = "I read it with the fetch_url tool: bees pollinate."
    assert not_an_answer(said, "Research bees", TOOLS, CONTROL) is None
    assert not_an_answer(said, "Research bees", TOOLS, [*CONTROL, "fetch_url"]) is not None


def test_an_answer_is_an_answer() -> None:
    example = 'Call it like this:\n```json\n{"name": "lookup", "arguments": {"q": "x"}}\n```\nIt returns a list.'
    for text in ("Bees pollinate flowers.", example, "```python\nprint(42)\n```"):
        assert not_an_answer(text, "Research bees", TOOLS) is None, text


def test_text_calls_are_read_by_default_on_servers_other_than_openais_own() -> None:
    assert reads_text_calls(OpenAIModel(MODEL, base_url="http://127.0.0.1:8080/v1"))
    assert not reads_text_calls(OpenAIModel("gpt-4o", api_key="sk-x"))
    assert reads_text_calls(ToolCallsModel(OpenAIModel("gpt-4o", api_key="sk-x"), "text"))
    assert not reads_text_calls(ToolCallsModel(OpenAIModel(MODEL, base_url="http://127.0.0.1:8080/v1"), "native"))
    assert not reads_text_calls(OfflineModel())


def test_a_verdict_or_a_ruling_written_as_json_is_read() -> None:
    from mcp_team.handoffs.judge import ruling_text

    verdict = parse_verdict('```json\n{"verdict": "REVISE", "reasons": ["cite the source"]}\n```')
    assert verdict is not None and (verdict.verdict, verdict.reasons) == ("REVISE", ["cite the source"])
    dressed = parse_verdict("Looks good.\n**Verdict:** PASS")
    assert dressed is not None and dressed.verdict == "PASS"
    ruling = ruling_text('{"decision": "researcher", "reasons": ["it cites Bell Labs"]}')
    assert ruling == "DECISION: researcher\n- it cites Bell Labs"


# --- whole runs on a model that writes every call as text ----------------------------------------------------


@pytest.fixture(params=TEXT_FORMATS)
def texting(request: pytest.FixtureRequest) -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI(brain=offline_brain, text_calls=request.param) as api:
        yield api


@pytest.mark.anyio
async def test_an_adaptive_run_routes_and_runs_calls_written_as_text(texting: FakeOpenAIAPI, spans: Spans) -> None:
    """The supervisor's handoffs and finalize, and the analyst's calculate, all written as text."""
    result = await Team(ModelSet.single(local(texting))).run(REQUEST)
    assert result.status == "complete", (result.failures, result.answer)
    assert not result.failures
    assert [h.target for h in result.handoffs] == ["researcher", "analyst", "writer", "reviewer"]
    assert all(h.text_call for h in result.handoffs)
    analyst = next(h for h in result.handoffs if h.target == "analyst")
    assert "42" in analyst.output  # its calculate call, written as text, ran
    reviewer = next(h for h in result.handoffs if h.target == "reviewer")
    assert reviewer.verdict is not None
    read = [spans.attr(s, TEXT_TOOL_CALLS) for s in spans.all if s.name.startswith(f"{OP_CHAT} ")]
    named = {name for names in read if names for name in names}
    assert {"handoff_to_researcher", "calculate", "finalize"} <= named
    for banned in ("```", "<tool_call>", '"arguments"', "[TOOL_CALLS]"):
        assert banned not in result.answer


@pytest.mark.anyio
async def test_a_planned_run_reads_its_plan_and_synthesis_written_as_text(texting: FakeOpenAIAPI) -> None:
    result = await Team(ModelSet.single(local(texting))).run(REQUEST, mode="planned")
    assert result.status == "complete", (result.failures, result.answer)
    assert result.plan is not None and len(result.plan.tasks) >= 3
    assert not result.failures
    assert '"answer"' not in result.answer and "finalize" not in result.answer


@pytest.mark.anyio
async def test_with_tool_calls_native_text_calls_go_back_and_the_planner_is_told_it_wrote_the_plan_as_text() -> None:
    with FakeOpenAIAPI(brain=offline_brain, text_calls="fenced") as api:
        result = await Team(ModelSet.single(ToolCallsModel(local(api), "native"))).run(REQUEST, mode="planned")
        repair = api.requests[1]["messages"][-1]["content"]
    assert result.status == "failed" and [f.kind for f in result.failures] == ["invalid_plan"]
    assert "written as text" in repair and "submit_plan" in repair
    assert "written as text" in result.failures[0].reason


@pytest.mark.anyio
async def test_a_handoff_with_invalid_arguments_goes_back_quoting_them_and_the_run_recovers() -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:
        wrong = {"name": "handoff_to_researcher", "arguments": {"job": "the transistor"}}
        api.reply(200, completion(f"```json\n{json.dumps(wrong)}\n```", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run(REQUEST)
        told = api.requests[1]["messages"][-1]["content"]
    assert "could not run" in told and "'task' is a required property" in told and '"job"' in told
    assert result.status == "complete"
    assert [(f.kind, f.recovered) for f in result.failures] == [("malformed_tool_call", True)]


@pytest.mark.anyio
async def test_a_supervisor_that_keeps_writing_bad_calls_ends_the_run_with_them_not_recovered() -> None:
    wrong = {"name": "handoff_to_wizard", "arguments": {"task": "magic"}}
    with FakeOpenAIAPI(brain=lambda request: offline_brain(request)) as api:
        for _ in range(3):
            api.reply(200, completion(f"```json\n{json.dumps(wrong)}\n```", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run("Do magic")
    assert result.status == "failed"
    assert [(f.kind, f.recovered) for f in result.failures] == [("malformed_tool_call", False)] * 3
    assert "handoff_to_wizard is not a tool" in (result.stopped_by or "")


@pytest.mark.anyio
@pytest.mark.parametrize("worked", [False, True])
async def test_a_call_that_cannot_run_before_any_work_is_followed_by_an_ask_held_to_a_handoff(worked: bool) -> None:
    """Qwen2.5-Coder-1.5B wrote `calculate_factorial` as text three times and the run failed: a text call that
    cannot run, made before any member did any work, goes back with the schema of one handoff for the next reply
    (as `_delegate_first`'s ask). Once work is done, the supervisor may finalize: its ask is not held."""
    wrong = {"name": "calculate_factorial", "arguments": {"n": 5}}
    with FakeOpenAIAPI(brain=offline_brain) as api:
        if worked:
            handoff = {"name": "handoff_to_writer", "arguments": {"task": HAIKU}}
            api.reply(200, completion(json.dumps(handoff), model=MODEL))
            api.reply(200, completion("Waves fold into foam.", model=MODEL))  # the writer
        api.reply(200, completion(f"```json\n{json.dumps(wrong)}\n```", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run(HAIKU)
        supervisor = api.requests[0]["messages"][0]["content"]
        asks = [r for r in api.requests if r["messages"][0]["content"] == supervisor]
    assert result.status == "complete" and [f.kind for f in result.failures] == ["malformed_tool_call"]
    after = asks[2] if worked else asks[1]  # the ask that follows the call that could not run
    assert "calculate_factorial is not a tool" in after["messages"][-1]["content"]
    if worked:
        assert all(a.get("response_format") is None for a in asks), [a.get("response_format") for a in asks]
    else:
        held = after["response_format"]["json_schema"]["schema"]
        assert held["properties"]["arguments"]["properties"]["task"] == {"type": "string", "const": HAIKU}
        assert asks[0].get("response_format") is None and all(a.get("response_format") is None for a in asks[2:])


@pytest.mark.anyio
async def test_a_supervisor_answer_that_ends_in_a_call_of_a_tool_it_lacks_is_asked_again() -> None:
    """Prose, then a fenced call of a tool the role was not offered: no answer."""
    with FakeOpenAIAPI(brain=offline_brain) as api:
        call = {"name": "web_search", "arguments": {"query": "transistor"}}
        api.reply(200, completion(f"Let me search.\n```json\n{json.dumps(call)}\n```", model=MODEL))
        result = await Team(ModelSet.single(ToolCallsModel(local(api), "native"))).run(REQUEST)
        told = api.requests[1]["messages"][-1]["content"]
    assert "web_search" in told
    assert result.status == "complete" and "web_search" not in result.answer


@pytest.mark.anyio
async def test_a_synthesis_that_returns_raw_json_is_read_or_asked_again() -> None:
    """The closing synthesis of a planned run returning `{"answer": "..."}` as text."""

    def synthesis_as_json(request: Any) -> Any:
        response = offline_brain(request)
        if request.system.startswith("Write the final answer"):  # the synthesis (no phase on the wire)
            from mcp_team.llm import ModelResponse, TextBlock

            return ModelResponse(content=[TextBlock(text=json.dumps({"answer": "The report."}))], model="x")
        return response

    with FakeOpenAIAPI(brain=synthesis_as_json) as api:
        read = await Team(ModelSet.single(local(api))).run(REQUEST, mode="planned")
    assert (read.status, read.answer) == ("complete", "The report.")  # read as its finalize call
    with FakeOpenAIAPI(brain=synthesis_as_json) as api:
        native = await Team(ModelSet.single(ToolCallsModel(local(api), "native"))).run(REQUEST, mode="planned")
    assert native.status == "partial"
    assert [f.kind for f in native.failures] == ["tool_json_as_answer"]
    assert '{"answer"' not in native.answer.split("---")[0]  # the finished results stand in, as they are
    assert any("closing synthesis gave no answer" in n for n in native.notes)


@pytest.mark.anyio
async def test_a_synthesis_that_talks_about_the_runs_own_tools_is_no_answer() -> None:
    """A closing synthesis saying what it would do with the supervisor's tools, as the recorded 1.5B model's
    supervisor did ("we can use the handoff_to_reviewer tool ..."): asked once more, told why; then the finished
    results stand in, and the run says why it has no answer of its own."""
    said = "To check the report, we can use the `handoff_to_reviewer` tool on it."

    def about_the_run(request: ModelRequest) -> ModelResponse:
        if request.system.startswith("Write the final answer"):  # the synthesis (no phase on the wire)
            return ModelResponse(content=[TextBlock(text=said)], model="x")
        return offline_brain(request)

    with FakeOpenAIAPI(brain=about_the_run) as api:
        result = await Team(ModelSet.single(ToolCallsModel(local(api), "native"))).run(REQUEST, mode="planned")
        asked = [r for r in api.requests if r["messages"][0]["content"].startswith("Write the final answer")]
    assert result.status == "partial" and [f.kind for f in result.failures] == ["tool_call_as_answer"]
    assert len(asked) == 2 and "handoff_to_reviewer" in str(asked[1]["messages"][-1]["content"])  # told why
    assert said not in result.answer.split("---")[0]  # the finished results stand in; only the note quotes it
    assert any("closing synthesis gave no answer" in n for n in result.notes)


@pytest.mark.anyio
async def test_a_specialist_that_writes_a_call_of_a_tool_it_lacks_is_told_and_its_answer_kept() -> None:
    """The writer (no tools) writing a handoff as its answer; told so, it writes the answer."""
    calls = iter(["handoff", "answer"])

    def brain(request: Any) -> Any:
        from mcp_team.llm import ModelResponse, TextBlock

        if request.member == "writer" and next(calls, "answer") == "handoff":
            call = {"name": "handoff_to_researcher", "arguments": {"task": "more facts"}}
            return ModelResponse(content=[TextBlock(text=f"<tool_call>\n{json.dumps(call)}\n</tool_call>")], model="x")
        return offline_brain(request)

    with FakeOpenAIAPI(brain=brain) as api:
        result = await Team(ModelSet.single(local(api))).run(REQUEST)
        writer_asks = [r for r in api.requests if "writer specialist" in r["messages"][0]["content"]]
    assert result.status == "complete"
    told = writer_asks[1]["messages"][-1]["content"]
    assert "handoff_to_researcher is not a tool you have" in told
    writer = next(h for h in result.handoffs if h.target == "writer")
    assert "handoff_to_researcher" not in writer.output


@pytest.mark.anyio
async def test_an_echo_of_the_request_is_no_answer() -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:
        api.reply(200, completion(REQUEST, model=MODEL))
        api.reply(200, completion(REQUEST, model=MODEL))
        result = await Team(ModelSet.single(local(api))).run(REQUEST)
    assert result.status == "failed"
    assert [(f.kind, f.recovered) for f in result.failures] == [("echoed_request", False)] * 2
    assert result.answer.startswith("No specialist finished any work") and "repeats the request" in result.answer


@pytest.mark.anyio
async def test_a_handoff_context_that_is_only_a_template_marker_is_dropped() -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:
        handoff = ("handoff_to_writer", {"task": "Write a haiku about bees", "context": "<tool_response>"})
        api.reply(200, completion(None, wire_calls(handoff), "tool_calls", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run("Write a haiku about bees")
    assert result.handoffs[0].context == ""
    assert "<tool_response>" not in json.dumps(api.requests[1]["messages"])


@pytest.mark.anyio
async def test_a_handoff_called_by_its_members_name_or_its_members_tool_runs_as_that_handoff() -> None:
    """As Qwen2.5-Coder 1.5B does: the supervisor "calls" `calculate` (the analyst's tool, named in the team's
    description) with a handoff's arguments; only the analyst has it, so it is the analyst's handoff."""
    for name, member in (("calculate", "analyst"), ("writer", "writer"), ("handoff_researcher", "researcher")):
        with FakeOpenAIAPI(brain=offline_brain) as api:
            call = {"name": name, "arguments": {"task": "Calculate 6*7", "expected_output": "the product"}}
            api.reply(200, completion(f"```json\n{json.dumps(call)}\n```", model=MODEL))
            result = await Team(ModelSet.single(local(api))).run("Calculate 6*7")
        assert (result.handoffs[0].target, result.handoffs[0].text_call) == (member, True)
        assert result.status == "complete" and not result.failures


@pytest.mark.anyio
async def test_a_call_of_a_members_own_tool_with_its_arguments_hands_the_request_to_that_member() -> None:
    """The supervisor "calls" `calculate` as the analyst would (`{"expression": ...}`): the analyst is meant, and
    gets the request, with the call as its context."""
    with FakeOpenAIAPI(brain=offline_brain) as api:
        call = {"name": "calculate", "arguments": {"number": 15, "percentage": 240}}
        api.reply(200, completion(f"```json\n{json.dumps(call)}\n```", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run("What is 15% of 240?")
    first = result.handoffs[0]
    assert (first.target, first.task, first.text_call) == ("analyst", "What is 15% of 240?", True)
    assert first.context == 'The supervisor asked for: calculate({"number": 15, "percentage": 240})'
    assert result.status == "complete" and not result.failures


def test_tool_calls_is_set_per_role_in_models_and_per_member(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_team.llm.building import build_models
    from mcp_team.llm.settings import ModelSettings
    from mcp_team.teamfile.loading import load_team

    team = tmp_path / "team.toml"
    team.write_text(
        '[models]\ntool_calls = "native"\nspecialist_tool_calls = "text"\n\n'
        '[[specialists]]\nname = "writer"\ndescription = "Writes."\nprompt = "Write."\n\n'
        '[[specialists]]\nname = "scout"\ndescription = "Finds."\nprompt = "Find."\ntool_calls = "auto"\n'
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    spec = load_team(str(team))
    settings = ModelSettings(model="openai:qwen").model_copy(update=spec.model_overrides)
    models = build_models(settings, spec.member_models)
    assert not reads_text_calls(models.for_role("supervisor"))  # native, from [models] tool_calls
    assert reads_text_calls(models.for_member("writer", "specialist"))  # text, its role's
    assert reads_text_calls(models.for_member("scout", "specialist"))  # auto on a server of one's own
    monkeypatch.setenv("MCP_TEAM_TOOL_CALLS", "native")
    assert not reads_text_calls(build_models(ModelSettings(model="openai:qwen")).for_role("specialist"))
    monkeypatch.setenv("MCP_TEAM_TOOL_CALLS", "sometimes")
    with pytest.raises(ValueError, match="tool_calls"):
        ModelSettings(model="openai:qwen")


@pytest.mark.anyio
async def test_a_supervisor_that_answers_itself_is_sent_once_to_delegate_and_its_first_answer_stands() -> None:
    """A small model's supervisor doing the work itself: told once to hand it to the team. Answering itself again,
    its first answer (before it was pressed) is the run's."""
    with FakeOpenAIAPI(brain=offline_brain) as api:
        api.reply(200, completion("def reverse(s):\n    return s[::-1]", model=MODEL))
        api.reply(200, completion("I will finalize the request with the results.", model=MODEL))
        result = await Team(ModelSet.single(local(api))).run("Write a Python function that reverses a string.")
        told = api.requests[1]["messages"][-1]["content"]
    assert "Do not answer yourself" in told and "handoff_to_coder: Writes, explains and fixes code." in told
    assert (result.status, result.answer) == ("complete", "def reverse(s):\n    return s[::-1]")
    with FakeOpenAIAPI(brain=offline_brain) as api:
        api.reply(200, completion("def reverse(s):\n    return s[::-1]", model=MODEL))
        delegated = await Team(ModelSet.single(local(api))).run("Write a Python function that reverses a string.")
    assert delegated.status == "complete" and delegated.handoffs[0].target == "coder"


HAIKU = "Write a haiku about the sea."


def delegates_when_pressed(request: ModelRequest) -> ModelResponse:
    """The offline model, but for the ask that sends the supervisor back to delegate: the handoff as JSON, the
    form the schema of that ask holds a reply to."""
    last = request.messages[-1].content
    if isinstance(last, str) and last.startswith("Do not answer yourself"):
        call = {"name": "handoff_to_writer", "arguments": {"task": HAIKU}}
        return ModelResponse(content=[TextBlock(text=json.dumps(call))], model=MODEL)
    return offline_brain(request)


@pytest.mark.anyio
@pytest.mark.parametrize("rejected", [False, True])
async def test_a_supervisor_sent_to_delegate_is_held_to_a_handoff_where_the_server_can_hold_it(rejected: bool) -> None:
    """The ask that sends it back carries the JSON schema of one handoff (`response_format`, for that ask only): a
    server that holds replies to a schema (llama.cpp, vLLM, Ollama: a grammar) leaves the model only the choice of
    the member who gets the request, and that reply runs as the handoff. A server that rejects the schema is asked
    without it."""
    rejects = ("response_format",) if rejected else ()
    with FakeOpenAIAPI(brain=delegates_when_pressed, reject_params=rejects) as api:
        api.reply(200, completion("Waves fold into foam / ...", model=MODEL))  # the supervisor answers itself
        result = await Team(ModelSet.single(local(api))).run(HAIKU)
        supervisor = api.requests[0]["messages"][0]["content"]
        asks = [r for r in api.requests if r["messages"][0]["content"] == supervisor]
    assert result.status == "complete" and result.handoffs[0].target == "writer" and result.handoffs[0].text_call
    schemas = [a.get("response_format") for a in asks]
    assert schemas[0] is None and schemas[1] is not None, schemas
    members = ["researcher", "analyst", "writer", "coder", "reviewer"]
    held = schemas[1]["json_schema"]["schema"]
    assert held["properties"]["name"]["enum"] == [f"handoff_to_{m}" for m in members]
    assert held["properties"]["arguments"]["properties"]["task"] == {"type": "string", "const": HAIKU}  # the request
    if rejected:  # the same ask again, without it; and never again
        assert asks[2]["messages"] == asks[1]["messages"] and all(s is None for s in schemas[2:]), schemas
    else:
        assert all(s is None for s in schemas[2:]), schemas  # that ask only
