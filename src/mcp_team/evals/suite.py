"""Eval suites: cases (a request and what must be true of its run) in a TOML file.

TOML, because the team file is TOML already (one format to learn), Python reads it without a
dependency (`tomllib`), and multi-line requests are plain triple-quoted strings. A suite:

    name = "routing"

    [[cases]]
    name = "transistor-report"
    request = "Research the history of the transistor and write a short report"
    expect.called = ["researcher", "writer"]     # must be called
    expect.order = ["researcher", "writer"]      # their first calls in this order
    expect.not_called = ["coder"]                # must not be called
    expect.only = true                           # nobody outside `called`
    expect.contains = ["transistor"]             # text the answer must contain (any case)
    expect.matches = ['(?i)bell labs|1947']      # patterns (Python regex) the answer must match
    expect.max_handoffs = 4                      # handoffs that ran, retries included
    expect.max_cost_usd = 0.05                   # what the run's priced calls cost
    expect.status = "complete"                   # complete (default), partial, failed or any

Every key is checked: a typo is an error naming the case and the key, never a check that silently passes.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mcp_team.errors import ConfigError, message_of
from mcp_team.handoffs.gates import Patterns
from mcp_team.handoffs.schema import Mode

BUILTIN = "builtin"  # `mcp-team eval builtin`: the built-in routing suite


class _Strict(BaseModel):
    # strict: TOML has real types, so `max_handoffs = "3"` or `only = "no"` is a mistake to name, not to coerce
    # (pydantic's lax mode reads "no" as false and "yes" as true).
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, strict=True)


class Expect(_Strict):
    """What must be true of a case's run; every field left out is not checked."""

    called: list[str] = Field(default_factory=list, description="Specialists that must be called.")
    order: list[str] = Field(default_factory=list, description="Specialists whose first calls come in this order.")
    not_called: list[str] = Field(default_factory=list, description="Specialists that must not be called.")
    only: bool = Field(default=False, description="No specialist outside `called` may be called.")
    contains: list[str] = Field(default_factory=list, description="Text the answer must contain, in any case.")
    matches: Patterns = Field(default_factory=list, description="Patterns (Python regex) the answer must match.")
    max_handoffs: int | None = Field(default=None, ge=0, description="Handoffs that ran, retries included.")
    max_cost_usd: float | None = Field(default=None, ge=0, description="The run's cost, where its calls are priced.")
    status: Literal["complete", "partial", "failed", "any"] = "complete"

    @model_validator(mode="after")
    def _consistent(self) -> Expect:
        # Expectations no run can meet are mistakes in the file: say so now, not as a case that always fails.
        if clash := sorted(set(self.called) & set(self.not_called)):
            raise ValueError(f"{', '.join(clash)} cannot be both called and not_called")
        if clash := sorted(set(self.order) & set(self.not_called)):
            raise ValueError(f"{', '.join(clash)} cannot be both in order and not_called")
        if twice := sorted({name for name in self.order if self.order.count(name) > 1}):
            raise ValueError(f"order names {', '.join(twice)} more than once; it is the order of first calls")
        if self.only and not self.called:
            raise ValueError("`only = true` needs the specialists in `called`")
        if self.status == "any" and not (
            self.routing() or self.contains or self.matches or self.max_cost_usd is not None
        ):
            raise ValueError('checks nothing: with status = "any" it needs another expectation, or it always passes')
        needed = len({*self.called, *self.order})
        if self.max_handoffs is not None and self.max_handoffs < needed:
            raise ValueError(
                f"max_handoffs = {self.max_handoffs} is fewer than the {needed} specialists called and order "
                "expect (one handoff each at least)"
            )
        return self

    def specialists(self) -> set[str]:
        """Every specialist the expectations name."""
        return {*self.called, *self.order, *self.not_called}

    def routing(self) -> bool:
        """Whether any expectation is about routing (which does not apply to a single agent)."""
        return bool(self.called or self.order or self.not_called or self.only or self.max_handoffs is not None)

    def describe(self) -> str:
        """The expectations in a few words, for a table."""
        parts = []
        if self.order:
            parts.append(" → ".join(self.order))
        if rest := [s for s in self.called if s not in self.order]:
            parts.append(", ".join(rest))
        if self.only:
            parts.append("only")
        if self.not_called:
            parts.append("not " + ", ".join(self.not_called))
        if self.max_handoffs is not None:
            parts.append(f"≤{self.max_handoffs} handoff{'s' if self.max_handoffs != 1 else ''}")
        parts += [f"has {text!r}" for text in self.contains] + [f"matches /{p}/" for p in self.matches]
        if self.max_cost_usd is not None:
            parts.append(f"≤${self.max_cost_usd:g}")
        if self.status != "complete":
            parts.append(f"status {self.status}")
        return "; ".join(parts) or "complete"


class Case(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Also a file name.")
    request: str = Field(min_length=1)
    mode: Mode | None = Field(default=None, description="adaptive or planned; default: the suite's, else the team's.")
    tags: list[str] = Field(default_factory=list, description="e.g. the domain; shown in the report.")
    expect: Expect = Field(default_factory=Expect)

    @field_validator("request")
    @classmethod
    def _not_blank(cls, request: str) -> str:
        if not request.strip():
            raise ValueError("the request is blank: write what the team should do")
        return request


class Suite(_Strict):
    name: str = ""
    description: str = ""
    mode: Mode | None = None
    cases: list[Case] = Field(min_length=1)

    @field_validator("cases")
    @classmethod
    def _unique(cls, cases: list[Case]) -> list[Case]:
        # Ignoring case: a name is also a recording's file name, and `Bees.jsonl` is `bees.jsonl` on macOS.
        names = [c.name.casefold() for c in cases]
        if dups := sorted({c.name for c in cases if names.count(c.name.casefold()) > 1}):
            raise ValueError(f"case names must be unique (ignoring case); used more than once: {', '.join(dups)}")
        return cases

    def check_team(self, team: Collection[str], source: str) -> None:
        """Raise `ConfigError` when a case names a specialist `team` does not have."""
        problems = [
            f"cases[{i}] ({case.name}).expect: unknown specialist '{name}'"
            for i, case in enumerate(self.cases)
            for name in sorted(case.expect.specialists() - set(team))
        ]
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems[:20])
            raise ConfigError(
                f"{source}: the suite names specialists the team does not have:\n{listed}\n"
                f"  the team is: {', '.join(team)}"
            )


def load_suite(source: str) -> tuple[Suite, str]:
    """The suite at path `source` (`builtin`: the built-in routing suite) and where it came from.
    Raises `ConfigError` naming the file, the case and the key."""
    path = Path(source)
    if source == BUILTIN and not path.exists():
        text, where = resources.files("mcp_team.evals").joinpath("routing.toml").read_text(encoding="utf-8"), BUILTIN
    else:
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8-sig")  # -sig: Windows editors start UTF-8 with a BOM
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): save it as UTF-8"
            ) from None
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such suite file (or run the built-in one: mcp-team eval builtin)") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the suite: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
        return Suite.model_validate(data), where
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        listed = "\n".join(f"  - {_where(e['loc'], data)}: {message_of(e)}" for e in exc.errors())
        raise ConfigError(f"{where}: invalid suite:\n{listed}") from None


def _where(loc: tuple[int | str, ...], data: dict[str, Any]) -> str:
    """An error's place as `cases[2] (name).expect.called`: the case by its number and its name."""
    parts = [str(p) for p in loc]
    if len(loc) > 1 and loc[0] == "cases" and isinstance(loc[1], int):
        cases = data.get("cases")
        case = cases[loc[1]] if isinstance(cases, list) and loc[1] < len(cases) else None
        name = f" ({case['name']})" if isinstance(case, dict) and isinstance(case.get("name"), str) else ""
        parts[:2] = [f"cases[{loc[1]}]{name}"]
    return ".".join(parts) or "suite"
