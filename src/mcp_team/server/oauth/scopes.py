"""Which scope each MCP request needs, with OAuth on.

- run the team (`team:run`): every tool that runs it or a specialist (`run_team`, `start_run`, `plan_team`,
  each specialist's own tool), a task-augmented call, `tasks/update`;
- read runs (`runs:read`): `get_run`, `team://runs` and `team://runs/{id}` (read or followed), `tasks/get`,
  `tasks/result`, `tasks/list`, the run pages;
- answer checkpoints (`checkpoints:answer`): `answer_checkpoint`;
- operators (`runs:admin`): see and cancel every run. It stands for `runs:read` too (the spec's scope
  hierarchies: an operator need not ask for both).
- cancel a run (`cancel_run`, `tasks/cancel`): `team:run` (one's own runs) or `runs:admin` (anyone's).

Everything else (initialize, listing tools, prompts and resources, the team's description, ping) needs a valid
token and no scope. Which runs a caller sees is decided elsewhere (`tasks.caller`): a scope says what kind of
thing one may do, the run's owner whose runs one may do it to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp_team.server.oauth.settings import OAuthSettings

RUNS_URI = "team://runs"
READ_TOOLS = frozenset({"get_run"})
CANCEL_TOOLS = frozenset({"cancel_run"})
ANSWER_TOOLS = frozenset({"answer_checkpoint"})
READ_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list"})


@dataclass(frozen=True)
class ScopePolicy:
    run: str
    read: str
    answer: str
    admin: str

    @classmethod
    def of(cls, settings: OAuthSettings) -> ScopePolicy:
        return cls(settings.scope_run, settings.scope_read, settings.scope_answer, settings.scope_admin)

    @property
    def supported(self) -> list[str]:
        """Every scope the server knows (the protected-resource metadata's `scopes_supported`)."""
        return [self.run, self.read, self.answer, self.admin]

    @property
    def usual(self) -> list[str]:
        """What a client should ask for to use the server as one person does (the 401 challenge's `scope`)."""
        return [self.run, self.read, self.answer]

    def needs(self, message: Mapping[str, Any]) -> tuple[str, ...]:
        """The scopes any one of which lets `message` (a JSON-RPC message) through; () when it needs none."""
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, Mapping) else {}
        if method == "tools/call":
            name = params.get("name")
            if name in READ_TOOLS:
                return (self.read, self.admin)
            if name in CANCEL_TOOLS:
                return (self.run, self.admin)
            if name in ANSWER_TOOLS:
                return (self.answer,)
            return (self.run,)  # run_team, start_run, plan_team, the specialists (and unknown names)
        if method in ("resources/read", "resources/subscribe"):
            return (self.read, self.admin) if _runs(params.get("uri")) else ()
        if method == "subscriptions/listen":
            notifications = params.get("notifications")
            uris = notifications.get("resourceSubscriptions") if isinstance(notifications, Mapping) else None
            return (self.read, self.admin) if isinstance(uris, list) and any(_runs(u) for u in uris) else ()
        if method in READ_METHODS:
            return (self.read, self.admin)
        if method == "tasks/cancel":
            return (self.run, self.admin)
        if method == "tasks/update":
            return (self.run,)
        return ()

    def missing(self, messages: Iterable[Mapping[str, Any]], granted: Iterable[str]) -> list[str]:
        """The scopes to ask for so that every one of `messages` passes: for each message that none of the
        granted scopes lets through, the first of those that would (empty: all pass)."""
        have = set(granted)
        wanted: list[str] = []
        for message in messages:
            needs = self.needs(message)
            if needs and not have.intersection(needs) and needs[0] not in wanted:
                wanted.append(needs[0])
        return wanted


def _runs(uri: object) -> bool:
    return isinstance(uri, str) and (uri == RUNS_URI or uri.startswith(RUNS_URI + "/"))
