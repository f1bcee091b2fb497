"""The reviewer's verdict format: `VERDICT: PASS` or `VERDICT: REVISE`, then `- reason` lines."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

_VERDICT = re.compile(r"^\s*VERDICT:\s*(PASS|REVISE)\b", re.I | re.M)

FORMAT_INSTRUCTIONS = (
    "End with your verdict in exactly this format:\n"
    "VERDICT: PASS (or VERDICT: REVISE)\n- one reason per line, concrete enough to act on"
)


class Verdict(BaseModel, defer_build=True):
    verdict: Literal["PASS", "REVISE"]
    reasons: list[str]


def parse_verdict(text: str) -> Verdict | None:
    """The last verdict in `text`, or None when the text has none."""
    matches = list(_VERDICT.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    reasons = [
        line.strip()[1:].strip() for line in text[last.end() :].splitlines() if line.strip().startswith(("-", "*"))
    ]
    return Verdict(verdict=last.group(1).upper(), reasons=reasons)  # type: ignore[arg-type]
