"""Writing team files: the commented starter `mcp-team init` writes (the built-in team, or any given) and the
shipped presets. Reading and validating them is `teamfile`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunSettings
from mcp_team.specialists import DEFAULT_TEAM, Specialist
from mcp_team.specialists.tools import MAX_RESULT_CHARS

PRESETS = (
    "competitive-intelligence",
    "patient-case",
    "portfolio",
    "curriculum",
    "product-launch",
    "contract-review",
    "research-desk",
)


def preset_text(name: str) -> str:
    """The text of a shipped preset team file."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset '{name}'; presets: {', '.join(PRESETS)}")
    return resources.files("mcp_team.teamfile").joinpath("presets", f"{name}.toml").read_text(encoding="utf-8")


def _toml_string(text: str) -> str:
    if "\n" in text and "'''" not in text:
        return f"'''\n{text}'''"
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def render_team_file(specialists: Sequence[Specialist] = DEFAULT_TEAM, settings: RunSettings | None = None) -> str:
    """A commented team file equal to the given team (by default, the built-in one)."""
    settings = settings or RunSettings()
    b = settings.budgets
    out = [
        "# mcp-team team file. Check it with `mcp-team check`; serve it with `mcp-team serve --team team.toml`.",
        "",
        "[supervisor]",
        f'mode = "{settings.mode}"            # adaptive: re-plan after each round; planned: plan first, run a DAG',
        f"max_retries = {settings.max_retries}              # retries of a failed handoff, each with a refined task",
        f"breaker_threshold = {settings.breaker_threshold}        # failures in a row that open a specialist's circuit",
        f"max_revisions = {settings.max_revisions}            # reviewer REVISE verdicts honoured",
        f"max_repeats = {settings.max_repeats}              # identical handoffs refused before the run stops",
        f"max_supervisor_turns = {settings.max_supervisor_turns}",
        f"call_timeout = {settings.call_timeout:g}          # seconds one model call may take",
        "# max_concurrency = 8        # model calls in flight at once (default: MCP_TEAM_MAX_CONCURRENCY or 8)",
        "",
        "[supervisor.budgets]         # shared by the whole run, parallel branches included",
        f"max_handoffs = {b.max_handoffs}",
        f"max_model_calls = {b.max_model_calls}",
        f"max_tokens = {b.max_tokens}",
        f"deadline_seconds = {b.deadline_seconds:g}",
        "",
        "[models]                     # PROVIDER:MODEL per role; unset: the environment's (see docs/models.md)",
        '# supervisor = "anthropic:claude-sonnet-5-5"',
        '# specialist = "openai:gpt-4o-mini"',
        '# supervisor_fallback = "openai:gpt-4o"   # used when the supervisor\'s model keeps failing',
        "# specialist_sampling = { temperature = 0.2, max_tokens = 2048 }",
        "",
        "[tools]                      # settings of the built-in tools a specialist can be granted:",
        "# calculate, fetch_url, read_file, list_files, write_note, read_notes",
        "read_dirs = []               # directories read_file/list_files may read (relative to this file)",
        "fetch_allow_private = false  # let fetch_url reach loopback/private/link-local addresses",
        "fetch_allowed_hosts = []     # hosts fetch_url may reach even if they are private",
        'notes_file = ".mcp-team/notes.jsonl"   # where write_note/read_notes keep the team\'s memory',
        f"max_result_chars = {MAX_RESULT_CHARS}    # what a model sees of any tool's result or error; more is cut",
        "",
        '# Tools from other MCP servers, granted to a specialist as "server/tool" or "server/*":',
        "# [[mcp_servers]]",
        '# name = "search"',
        '# command = "uvx"                # or: url = "http://127.0.0.1:9000/mcp"',
        '# args = ["some-search-mcp"]',
        '# allowed_tools = ["web_search"]',
    ]
    for s in specialists:
        out += [
            "",
            "[[specialists]]",
            f"name = {_toml_string(s.name)}",
            f"description = {_toml_string(s.description)}   # one line; the supervisor routes by it",
            f'model_role = "{s.model_role}"     # supervisor or specialist: which model it runs on',
            f"max_turns = {s.max_turns}",
            (
                f"max_tokens = {s.max_tokens}"
                if s.max_tokens
                else "# max_tokens = 50000          # token budget per handoff"
            ),
            f"tools = {json.dumps([t.name for t in s.tools])}",
            '# model = "openai:qwen2.5:7b"  # its own model (also base_url, api_key_env, fallback_model, sampling)',
        ]
        if s.returns_verdict:
            out.append("returns_verdict = true      # its answers end in VERDICT: PASS or VERDICT: REVISE")
        out.append(f"prompt = {_toml_string(s.system_prompt)}")
    return "\n".join(out) + "\n"
