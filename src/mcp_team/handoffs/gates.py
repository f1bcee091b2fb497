"""Quality gates: deterministic checks on a member's output before anyone (the reviewer, the synthesis) reads it.

A gate that fails sends the work back to its author like a reviewer's REVISE verdict, with the
gate's messages as the reasons, within the run's revision cap (`RunSettings.max_revisions`). The
checks are plain text rules, so they cost no model call and give the same answer every time.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# A source is a link or a numbered citation such as [1].
_SOURCE = re.compile(r"https?://[^\s)>\]]+|\[\d{1,3}\]")
_WORD = re.compile(r"\S+")


def _compiles(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    return patterns


Patterns = Annotated[list[str], AfterValidator(_compiles)]
"""Python regular expressions, each checked to compile when the file is loaded (gates, eval suites)."""


class Gates(BaseModel):
    """The gates of one member, as the team file's `[specialists.gates]` table declares them."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    max_words: int | None = Field(default=None, ge=1, description="At most this many words.")
    required_sections: list[str] = Field(
        default_factory=list,
        description="Section titles the output must have: a Markdown heading (`## Sources`) or a line "
        "that starts with the title and a colon (`Sources:`), in any case.",
    )
    required_patterns: Patterns = Field(
        default_factory=list, description="Python regular expressions the output must match."
    )
    min_sources: int = Field(
        default=0, ge=0, description="At least this many cited sources: links (http/https) or [n] citations."
    )

    def check(self, text: str) -> list[str]:
        """What the output fails, one message per gate, each saying how to pass; empty when it passes."""
        problems = []
        if self.max_words is not None and (words := len(_WORD.findall(text))) > self.max_words:
            problems.append(f"quality gate max_words: {words} words, at most {self.max_words} allowed; shorten it")
        for title in self.required_sections:
            heading = re.compile(rf"^\s*(#+\s*{re.escape(title)}\b|{re.escape(title)}\s*:)", re.I | re.M)
            if not heading.search(text):
                problems.append(f"quality gate required_sections: no '{title}' section; add one headed '## {title}'")
        for pattern in self.required_patterns:
            if not re.search(pattern, text):
                problems.append(f"quality gate required_patterns: the output does not match {pattern!r}")
        if self.min_sources and (found := len(set(_SOURCE.findall(text)))) < self.min_sources:
            problems.append(
                f"quality gate min_sources: {found} cited source(s), at least {self.min_sources} needed; "
                f"cite them as links or [n] references"
            )
        return problems
