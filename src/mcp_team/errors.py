"""The errors mcp-team raises, under one base, so a caller can catch everything of ours at once.

Every layer may import this module; it imports nothing of mcp-team. Messages are for people: they
say what is wrong and how to fix it, and never contain credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class McpTeamError(Exception):
    """Base of every error mcp-team raises on purpose."""


class ConfigError(McpTeamError):
    """Settings or files that cannot work; the message says how to fix them."""


class BudgetExhausted(McpTeamError):
    """A run budget (handoffs, model calls, tokens, cost, deadline) ran out; `budget` says which, in words."""

    def __init__(self, budget: str) -> None:
        super().__init__(budget)
        self.budget = budget


def message_of(error: Mapping[str, Any]) -> str:
    """One pydantic error's message for people: a validator's own words, without the `Value error, ` (or
    `Assertion failed, `) pydantic puts before them."""
    return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
