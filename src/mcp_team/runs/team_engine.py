"""The real engine behind the run service: a `Team` as the `Engine` that `Runs` executes.

A durable run runs the same `Team.run` as an ephemeral one, on a copy of the team whose models and
side-effecting tools are DBOS steps (`runtime.durable_team`) and on the `DurableRuntime` (branches, gather,
recorded decisions). An ephemeral service never builds that copy, and never imports DBOS.

Which tools are safe to run again (a step in flight when the process died has no stored result and runs
again after a restart): `calculate` is pure (not a step at all); `read_file`, `list_files`,
`read_notes` and `fetch` only read; `write_note` skips a note identical to one already saved, so a
repeat writes nothing twice. Tools of external MCP servers are steps, but whether a repeat is harmless
is up to that server.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_team.handoffs import RunResult, Runtime, Team
from mcp_team.handoffs.checkpoints import Approver
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import Model
from mcp_team.runs.threads import compose_request
from mcp_team.runs.types import EventSink, RunInput
from mcp_team.specialists import Specialist


def team_hash(team: Team) -> str:
    """A digest of everything a replay depends on: specialists (prompts, tools, limits), settings, models."""
    models = team.models

    def model_id(m: Model) -> list[str]:
        return [m.provider, m.name, str(getattr(m, "base_url", "") or "")]

    def specialist_doc(s: Specialist) -> dict[str, Any]:
        doc = {
            "name": s.name,
            "description": s.description,
            "prompt": s.system_prompt,
            "role": s.model_role,
            "max_turns": s.max_turns,
            "max_tokens": s.max_tokens,
            "verdict": s.returns_verdict,
            "tools": [[t.name, t.description, t.input_schema] for t in s.tools],
        }
        if isinstance(s, SubTeam):  # a team inside the team: its members and settings are replayed too
            doc["members"] = [specialist_doc(m) for m in s.members]
            doc["settings"] = s.settings.model_dump(mode="json")
        return doc

    doc: dict[str, Any] = {
        "specialists": [specialist_doc(s) for s in team.specialists],
        "settings": team.settings.model_dump(mode="json"),
        "models": {role: model_id(m) for role, m in sorted(models.models.items())},
        "members": {name: model_id(m) for name, m in sorted(models.members.items())},
        "fallbacks": {name: model_id(m) for name, m in sorted(models.fallbacks.items())},
    }
    return hashlib.blake2b(json.dumps(doc, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


@dataclass
class TeamEngine:
    """A `Team` as the run service's `Engine` (runs/workflow.py)."""

    team: Team
    team_hash: str = field(init=False)

    def __post_init__(self) -> None:
        self.team_hash = team_hash(self.team)

    @functools.cached_property
    def durable(self) -> Team:
        """The team with its model and tool calls as DBOS steps (built on the first durable run: DBOS is loaded)."""
        from mcp_team.runs.runtime import durable_team

        return durable_team(self.team)

    async def run(
        self,
        run: RunInput,
        runtime: Runtime | None,
        on_event: EventSink,
        on_finish: Callable[[RunResult], None],
        approve: Approver | None = None,
    ) -> RunResult:
        team = self.durable if runtime is not None else self.team
        return await team.run(
            compose_request(run.request, run.history),
            mode=run.mode,
            budgets=run.budgets,
            on_event=on_event,
            on_finish=on_finish,
            run_id=run.run_id,
            runtime=runtime,
            started_at=run.started_at,
            resumed_at=run.resumed_at,
            checkpoints=run.checkpoints,
            approve=approve,
        )
