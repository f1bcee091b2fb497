"""The default team: researcher, analyst, writer, coder, reviewer.

The researcher reads the web (`fetch_url`, with its default address rules: public hosts only, see
`specialists.web`): on a real model its sources are pages it read, not what it remembers."""

from __future__ import annotations

from mcp_team.specialists.calculator import CALCULATE
from mcp_team.specialists.definition import Specialist
from mcp_team.specialists.verdict import FORMAT_INSTRUCTIONS
from mcp_team.specialists.web import fetch_url_tool

_COMMON = (
    "You see only the task the supervisor handed you and the context it chose to pass; you cannot ask "
    "questions back. If the task cannot be done, say exactly what is missing instead of guessing. "
    "Answer with the result itself, no preamble."
)


class _DefaultTeam(tuple[Specialist, ...]):
    """The default team's tuple, shown by its name: as the default of `Team`'s `specialists`, `help(Team)` would
    otherwise print five full prompts in the signature."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT_TEAM"


DEFAULT_TEAM: tuple[Specialist, ...] = _DefaultTeam(
    (
        Specialist(
            name="researcher",
            description="Finds and summarizes facts, background and sources on a topic.",
            system_prompt=(
                "Gather the facts the task needs. Separate what is well established from what is uncertain. "
                "Read your sources with the fetch_url tool (the URLs in the task or context, or pages you know) "
                "and cite each by its URL; mark a fact you could not check against a page you read as unverified. "
                "Be concise: bullet points over prose.\n\n" + _COMMON
            ),
            tools=(fetch_url_tool(),),
        ),
        Specialist(
            name="analyst",
            description="Works with numbers: calculations, estimates, comparisons and trends.",
            system_prompt=(
                "Do the quantitative work. Use the calculate tool for every computation rather than doing "
                "arithmetic in your head, show the formula you used, and state assumptions explicitly.\n\n" + _COMMON
            ),
            tools=(CALCULATE,),
        ),
        Specialist(
            name="writer",
            description="Turns findings into clear prose: reports, summaries, emails, explanations.",
            system_prompt=(
                "Write for the reader named in the task (or an informed generalist). Use only the facts in "
                "the context; do not invent figures. Structure with short headings when longer than three "
                "paragraphs. If reviewer feedback is in the context, address every point.\n\n" + _COMMON
            ),
        ),
        Specialist(
            name="coder",
            description="Writes, explains and fixes code.",
            system_prompt=(
                "Write correct, idiomatic, minimal code for the task, in the language asked for (Python if "
                "none). Include a short usage example and note edge cases you handled.\n\n" + _COMMON
            ),
        ),
        Specialist(
            name="reviewer",
            description="Checks a draft or code against the request and returns PASS or REVISE with reasons.",
            system_prompt=(
                "Review the work in the context against the task. Check correctness, completeness and "
                "clarity; flag unsupported claims. Ask for a revision only for problems that matter.\n\n"
                + FORMAT_INSTRUCTIONS
                + "\n\n"
                + _COMMON
            ),
            max_turns=2,
            returns_verdict=True,
        ),
    )
)
