"""What `mcp-team run` shows on the terminal (stderr) besides the answer: a line as each handoff starts and
finishes, the summary line at the end (status, handoffs, model calls, tokens, cost, run and trace ids), and,
for a replay, whether it reproduced the recorded run and how it differs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from mcp_team.handoffs import RunEvent, RunResult
    from mcp_team.llm import ModelSet
    from mcp_team.llm.replay import Replay


def progress(console: Console) -> Callable[[RunEvent], Awaitable[None]]:
    """A line on `console` as each handoff starts and finishes, and for the run's other events."""

    async def on_event(event: RunEvent) -> None:
        r = event.record
        if event.kind == "handoff_started" and r is not None:
            retry = f" (retry {r.attempt - 1})" if r.attempt > 1 else ""
            console.print(f"[cyan]→ {r.id} {r.target}{retry}[/cyan] {_short(r.task)}")
        elif event.kind == "handoff_finished" and r is not None:
            seconds = (r.ended_at - r.started_at).total_seconds() if r.ended_at and r.started_at else 0.0
            if r.status == "completed":
                verdict = f" {r.verdict.verdict}" if r.verdict else ""
                tokens = r.usage.total_tokens
                console.print(f"[green]✓ {r.id} {r.target}[/green]{verdict} {seconds:.1f}s {tokens} tokens")
            else:
                console.print(f"[red]✗ {r.id} {r.target} {r.status} ({r.error_type})[/red] {_short(r.error or '')}")
        else:
            console.print(f"[dim]· {event.message}[/dim]")

    return on_event


def warn_about_servers(console: Console, models: ModelSet) -> None:
    """Once, at the start of a run: a model name that an OpenAI-compatible server of one's own does not serve
    (asked with `GET /models`, see `llm.served`), which would fail the first call. Nothing when all is well, or
    when the server cannot be asked (the run's first call says why)."""
    import anyio
    from rich.markup import escape

    from mcp_team.llm.served import endpoints, inquire

    members = [("the supervisor", models.for_role("supervisor")), ("the specialists", models.for_role("specialist"))]
    found = endpoints([*members, *((f"specialist {name!r}", m) for name, m in models.members.items())])
    if not found:
        return
    anyio.run(inquire, found)
    for endpoint in found:
        for warning in endpoint.warnings():
            console.print(f"[yellow]mcp-team: warning: {escape(warning)}[/yellow]")


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def summary(console: Console, result: RunResult) -> None:
    style = {"complete": "green", "partial": "yellow"}.get(result.status, "red")
    u = result.usage
    console.print(
        f"[{style}]{result.status}[/{style}]: {_count(len(result.handoffs), 'handoff')}, "
        f"{_count(u.model_calls, 'model call')}, "
        f"{u.total.total_tokens} tokens, {_cost(u.total.cost_usd)}, run {result.run_id}"
        + (f", trace {result.trace_id}" if result.trace_id else "")
    )
    from rich.markup import escape  # a note names settings in brackets ("[supervisor.budgets]")

    for note in result.notes:  # what the caller should know (each with what to change): --json has them too
        console.print(f"[yellow]note:[/yellow] {escape(note)}")


def _cost(usd: float | None) -> str:
    """A run's cost for people: unknown (a local or offline model) is not $0."""
    return "cost unknown" if usd is None else f"${usd:.4f}"


def compare(console: Console, replay: Replay, result: RunResult) -> None:
    """Say whether a replayed run is the recorded one, and if not, how it differs."""
    from mcp_team.evals.recordings import ReplayOutcome

    found = ReplayOutcome(replay.recording.path, result, replay.recording.result, replay.unused()).differences()
    if not found:
        console.print("mcp-team: the replay reproduced the recorded run")
        return
    console.print("[yellow]mcp-team: the replay differs from the recorded run:[/yellow]")
    for difference in found[:10]:
        console.print(f"[yellow]  - {_short(difference, 200)}[/yellow]")


def _short(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
