"""Specialist tools: a typed definition plus an async function. Each specialist owns its list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_team.errors import McpTeamError
from mcp_team.llm import ToolDefinition

# 25,000 to 33,000 tokens of English: a result that fits the smallest context of the default models (128k tokens)
# with room for the task, earlier turns and the answer. A longer one would fail the next model call on the
# context or the token budget, with an error that does not name the tool.
MAX_RESULT_CHARS = 100_000


class ToolFailed(McpTeamError):
    """A tool refused or failed; the message goes back to the model as an error result."""


@dataclass(frozen=True)
class Tool:
    """A tool a specialist may call. What it does to the world is what MCP clients are told of the specialist's
    tool and of `run_team` (their readOnlyHint and destructiveHint), and a client may skip asking its user
    before a read-only one: the defaults are MCP's, the cautious ones (it may change and delete things). Say
    `read_only=True` of a tool that only reads."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]
    read_only: bool = False
    destructive: bool = True  # when not read-only: it may delete or overwrite, not only add
    max_result_chars: int = MAX_RESULT_CHARS  # what the model sees of a result or error: longer ones are cut

    def __post_init__(self) -> None:
        # Checked here, not when a model first calls it: a wrong schema would fail every model call of its specialist.
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a Tool's name must be a non-empty str, not {self.name!r}")
        if not isinstance(self.input_schema, dict):
            wrong = type(self.input_schema).__name__
            raise TypeError(
                f"tool {self.name!r}: input_schema must be a JSON schema dict, not {wrong}: "
                '{"type": "object", "properties": {...}}'
            )
        limit = self.max_result_chars
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"tool {self.name!r}: max_result_chars must be a positive int, not {limit!r}")

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.name, description=self.description, input_schema=self.input_schema)


_CUT = "\n\n[truncated: the "  # where `capped` cut: its note starts here, right after the first `limit` characters
_NOTE_MAX = 300  # its note's length, at most: a result that only looks cut (a longer tail) is cut


def capped(text: str, limit: int, what: str = "result") -> str:
    """`text`, or its first `limit` characters and a note saying it was cut, how long it was and what to do.

    Cut on characters (code points), never inside one: the text stays valid whatever its encoding. Text it cut
    already is returned as it is (a durable run cuts a result inside its step, so the database keeps no more than
    the model sees, and the specialist's loop cuts every result again). The note stays generic: a tool that can
    give a part (`read_file`, `fetch_url`) sizes its parts to fit `limit` and ends each with its own note naming
    the argument to go on with, which this cut would hide."""
    if len(text) <= limit or (text.startswith(_CUT, limit) and len(text) - limit <= _NOTE_MAX):
        return text
    return (
        f"{text[:limit]}{_CUT}{what} is {len(text):,} characters; only the first {limit:,} are shown. "
        "If you need the rest, ask the tool for less at a time (a narrower query, a part or a page).]"
    )
