"""What the runs database keeps is redacted before it is written: no known secret at rest in clear.

Every value written to the runs database goes through here: the run rows (`record_json`, runs/tables.py) and
every value DBOS stores for us through our serializer (`at_rest`, runs/serializer.py: workflow inputs and outputs,
step outputs such as a tool's raw result, events, messages, errors). What is replaced is what the redactor knows
(telemetry/content.py): the server's keys and tokens, every MCP server's env value (all registered at start-up),
and secret-looking values (`sk-...` keys, `Authorization: Bearer ...`, `api_key=...`, a value under a key such as
`password`). Recordings and trace files are redacted by their own writers, with the same redactor.

Redaction before write, not encryption with an operator's key: a secret that is never written cannot leak from a
backup, a copied state directory, a replica's PostgreSQL dump or a `runs show` by someone who may read the file;
there is no key to lose, rotate or hand to every replica and every `mcp-team runs` command; and the database
stays readable by the tools that read it today (the listings, `runs show`, DBOS). What it costs: a run resumed
after a restart sees `[redacted]` where its request or an earlier tool result held a secret (the secret itself is
not kept anywhere to resume with), and redaction is by what is known: a secret the redactor cannot recognise is
written as it came. A run replayed from a recording is unaffected: recordings were already redacted, and their
requests are matched on the redacted text.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_team.runs.types import RunRecord
from mcp_team.telemetry.content import redact_value


def at_rest(value: Any) -> Any:
    """A JSON value (lists, dicts, strings...) as it may be stored: every string redacted."""
    return redact_value(value)


def record_json(record: RunRecord) -> str:
    """The run's record as the runs table stores it: JSON, redacted."""
    return json.dumps(at_rest(record.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":"))
