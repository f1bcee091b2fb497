"""The reviewer's verdict format: `VERDICT: PASS` or `VERDICT: REVISE`, then `- reason` lines."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from mcp_team.llm.text_blocks import json_objects

# `VERDICT: PASS`, as asked; also as small models dress it: `**Verdict:** REVISE`, `### VERDICT - PASS`.
_VERDICT = re.compile(r"^[\s*_#>-]*VERDICT[\s*_]*[:\-\u2013][\s*_]*(PASS|REVISE)\b", re.I | re.M)

FORMAT_INSTRUCTIONS = (
    "End with your verdict in exactly this format:\n"
    "VERDICT: PASS (or VERDICT: REVISE)\n- one reason per line, concrete enough to act on"
)


class Verdict(BaseModel, defer_build=True):
    verdict: Literal["PASS", "REVISE"]
    reasons: list[str]


def parse_verdict(text: str) -> Verdict | None:
    """The last verdict in `text`, or None when the text has none. Written as asked, or as JSON (`{"verdict":
    "REVISE", "reasons": [...]}`, as a model that writes its steps as tool calls does)."""
    matches = list(_VERDICT.finditer(text))
    if not matches:
        return _json_verdict(text)
    last = matches[-1]
    reasons = [
        line.strip()[1:].strip() for line in text[last.end() :].splitlines() if line.strip().startswith(("-", "*"))
    ]
    return Verdict(verdict=last.group(1).upper(), reasons=reasons)  # type: ignore[arg-type]


def _json_verdict(text: str) -> Verdict | None:
    for item in reversed(json_objects(text)):
        value = item.get("verdict") or item.get("VERDICT")
        if isinstance(value, str) and value.strip().upper() in ("PASS", "REVISE"):
            reasons = item.get("reasons") or item.get("reason") or []
            if isinstance(reasons, str):
                reasons = [reasons]
            listed = [str(r).strip() for r in reasons if str(r).strip()] if isinstance(reasons, list) else []
            return Verdict(verdict=value.strip().upper(), reasons=listed)  # type: ignore[arg-type]
    return None
