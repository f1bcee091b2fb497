"""The records of conflicting results and the judge's rulings on them (see `judge`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mcp_team.llm import Usage
from mcp_team.llm.types import no_usage


class Position(BaseModel, defer_build=True):
    specialist: str
    claim: str


class Conflict(BaseModel, defer_build=True):
    about: str = Field(min_length=1)
    positions: list[Position] = Field(min_length=2)


class Ruling(BaseModel, defer_build=True):
    """A conflict and the judge's verdict on it, as the run's record keeps it."""

    conflict: Conflict
    judge: str
    status: Literal["completed", "failed", "cancelled"]  # cancelled: the run was, while the judge ruled
    verdict: str = Field(description="The judge's decision and reasons; the error when it failed.")
    usage: Usage = Field(default_factory=no_usage)
