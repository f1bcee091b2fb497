"""Team files inside team files: loading the members that are teams (see `handoffs.subteam`).

A member declares `team = "research.toml"` (another team file, relative to this one) or an inline
table `team = { specialists = [...], supervisor = {...} }`. Loading follows them, and refuses a cycle
between files and a tree deeper than `[supervisor] max_team_depth` (default 3, the top file counts
as 1) with an error naming the chain of files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_team.teamfile.loading import TeamSpec
    from mcp_team.teamfile.schema import TeamFileModel


def load_subteams(
    model: TeamFileModel, source: str, base: Path, stack: tuple[Path, ...], max_depth: int
) -> tuple[list[str], dict[str, TeamSpec]]:
    """The nested teams of `model` (a file at depth `len(stack)`), or the problems found loading them."""
    from mcp_team.teamfile.loading import TeamSpec, load_team_file
    from mcp_team.teamfile.problems import check, renumbered, validate
    from mcp_team.teamfile.schema import TeamFileError, TeamFileModel

    problems: list[str] = []
    subteams: dict[str, TeamSpec] = {}
    for i, spec in enumerate(model.specialists):
        if spec.team is None:
            continue
        where = f"specialists[{i}].team"
        depth = len(stack) + 1
        chain = " -> ".join(p.name for p in stack)
        if depth > max_depth:
            problems.append(
                f"{where}: teams nest deeper than max_team_depth ({max_depth}): {chain} -> {spec.name}; "
                f"flatten a level or raise [supervisor] max_team_depth in the top team file"
            )
            continue
        if isinstance(spec.team, str):
            path = (base / spec.team).resolve()
            if path in stack:
                problems.append(f"{where}: a cycle between team files: {chain} -> {path.name}")
                continue
            try:
                subteams[spec.name] = load_team_file(path, _stack=stack, _max_depth=max_depth)
            except TeamFileError as exc:
                problems += [f"{where} ({spec.team}): {p}" for p in exc.problems]
            continue
        inline, found, left_out = validate(TeamFileModel, spec.team)  # the schema's errors, and the rest checked
        if inline is None:
            problems += [f"{where}.{p}" for p in found]
            continue
        checked, prompts = check(inline, base, left_out)
        nested, deeper = load_subteams(inline, source, base, (*stack, Path(f"{spec.name} (inline)")), max_depth)
        if found := [*found, *checked, *(renumbered(p, left_out) for p in nested)]:
            problems += [f"{where}.{p}" for p in found]
            continue
        subteams[spec.name] = TeamSpec(f"{source} ({spec.name})", inline, prompts, base, subteams=deeper)
    return problems, subteams
