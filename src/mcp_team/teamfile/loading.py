"""The team file (`team.toml`): finding it, validating it and turning it into a team (writing one: `starter`).

Loading is two steps. `load_team_file` parses and validates without starting anything, so
`mcp-team check` and a reload can reject a bad file before it replaces a good team; `TeamSpec.build`
then makes the specialists, given the pool of external MCP servers the server keeps running.
Every error names the file, the key path and what was expected.
"""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunSettings
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm.settings import MemberModel
from mcp_team.specialists import DEFAULT_TEAM, Specialist, Tool
from mcp_team.specialists.calculator import CALCULATE
from mcp_team.specialists.mcp_config import McpServerConfig
from mcp_team.teamfile.problems import BUILTIN_TOOLS as BUILTIN_TOOLS
from mcp_team.teamfile.problems import RESERVED_NAMES as RESERVED_NAMES
from mcp_team.teamfile.problems import check, renumbered, validate
from mcp_team.teamfile.schema import TeamFileError, TeamFileModel, ToolSettings
from mcp_team.teamfile.subteams import load_subteams

if TYPE_CHECKING:  # the pool imports the MCP SDK, which a team without MCP servers never needs
    from mcp_team.specialists.mcp_tools import McpToolPool


@dataclass(frozen=True)
class TeamSpec:
    """A validated team file, or a team defined in code (the default team is one), ready to build."""

    source: str  # the file's path, or a description such as "built-in default team"
    model: TeamFileModel | None = None  # None for a team defined in code
    prompts: dict[str, str] = field(default_factory=dict)  # specialist name -> system prompt
    base_dir: Path = field(default_factory=Path.cwd)
    specialists: tuple[Specialist, ...] = DEFAULT_TEAM  # a team defined in code
    settings: RunSettings = field(default_factory=RunSettings)
    overrides: dict[str, Any] = field(default_factory=dict)  # run settings given on the command line
    subteams: dict[str, TeamSpec] = field(default_factory=dict)  # members that are teams (teamfile/subteams.py)

    @classmethod
    def of(
        cls,
        specialists: Sequence[Specialist],
        settings: RunSettings | None = None,
        source: str = "team defined in code",
    ) -> TeamSpec:
        return cls(source, specialists=tuple(specialists), settings=settings or RunSettings())

    @property
    def names(self) -> list[str]:
        """The specialists' names, without building them."""
        return [s.name for s in (self.model.specialists if self.model else self.specialists)]

    @property
    def path(self) -> Path | None:
        return Path(self.source) if self.model is not None else None

    @property
    def run_settings(self) -> RunSettings:
        if self.model is None:
            return self.settings.model_copy(update=self.overrides) if self.overrides else self.settings
        exclude = {"max_concurrency", "max_team_depth"}
        settings = RunSettings(**{**self.model.supervisor.model_dump(exclude=exclude), **self.overrides})
        gates = {s.name: s.gates for s in self.model.specialists if s.gates is not None}
        return settings.model_copy(update={"gates": {**settings.gates, **gates}}) if gates else settings

    @property
    def model_overrides(self) -> dict[str, Any]:
        """Settings the file overrides in `ModelSettings`: model names per role, concurrency."""
        if self.model is None:
            return {}
        overrides: dict[str, Any] = {}
        if self.model.models.supervisor:
            overrides["supervisor_model"] = self.model.models.supervisor
        if self.model.models.specialist:
            overrides["specialist_model"] = self.model.models.specialist
        if self.model.models.tool_calls:
            overrides["tool_calls"] = self.model.models.tool_calls
        if self.model.supervisor.max_concurrency:
            overrides["max_concurrency"] = self.model.supervisor.max_concurrency
        for role in ("supervisor", "specialist"):
            for key in (f"{role}_fallback", f"{role}_sampling", f"{role}_tool_calls"):
                if (value := getattr(self.model.models, key)) is not None:
                    overrides[key] = value
        return overrides

    @property
    def member_models(self) -> dict[str, MemberModel]:
        """The specialists that name their own model, endpoint, fallback or sampling settings, by name."""
        if self.model is None:
            return {}
        return {
            s.name: MemberModel(
                model=s.model,
                base_url=s.base_url,
                api_key_env=s.api_key_env,
                fallback=s.fallback_model,
                sampling=s.sampling,
                tool_calls=s.tool_calls,
                role=s.model_role,
            )
            for s in self.model.specialists
            if s.model or s.base_url or s.api_key_env or s.fallback_model or s.sampling or s.tool_calls
        }

    def secrets(self) -> list[str]:
        """Values that must never be logged or traced: the MCP servers' env values and headers."""
        return [v for m in self.mcp_servers for v in [*m.env.values(), *m.headers.values()]]

    @property
    def mcp_servers(self) -> list[McpServerConfig]:
        """This file's servers, and its nested teams' (a name declared twice is the first one)."""
        own = list(self.model.mcp_servers) if self.model else []
        for sub in self.subteams.values():
            own += [s for s in sub.mcp_servers if s.name not in {o.name for o in own}]
        return own

    @asynccontextmanager
    async def mcp_pool(self) -> AsyncIterator[McpToolPool | None]:
        """The team's external MCP servers, up until the block ends; None (and no MCP SDK import) without any."""
        if not (servers := self.mcp_servers):
            yield None
            return
        from mcp_team.specialists.mcp_tools import McpToolPool

        async with McpToolPool(servers) as pool:
            yield pool

    def build(self, pool: McpToolPool | None = None, *, lenient: bool = False) -> tuple[Specialist, ...]:
        """The specialists, each with only the tools granted to it.

        Tools of external MCP servers come from `pool`; without one, `lenient` leaves them out (for
        the moment before the servers start) instead of raising.
        """
        if self.model is None:
            return self.specialists
        granted = {grant for spec in self.model.specialists for grant in spec.tools if "/" not in grant}
        builtins = _builtin_tools(self.model.tools, self.base_dir, granted)
        team: list[Specialist] = []
        for spec in self.model.specialists:
            if spec.name in self.subteams:
                sub = self.subteams[spec.name]
                members = sub.build(pool, lenient=lenient)
                prompt = f"A team of {', '.join(m.name for m in members)}: {spec.description}"
                team.append(
                    SubTeam(
                        name=spec.name, description=spec.description, system_prompt=prompt, members=members,
                        settings=sub.run_settings,
                    )
                )  # fmt: skip
                continue
            tools: list[Tool] = []
            for grant in spec.tools:
                if "/" not in grant:
                    tools.append(builtins[grant])
                    continue
                server, _, name = grant.partition("/")
                if pool is not None:
                    try:
                        tools.extend(pool.tools(server, None if name == "*" else [name]))
                    except ValueError as exc:
                        raise ConfigError(f"{self.source}: specialist {spec.name}: {exc}") from None
                elif not lenient:
                    raise ConfigError(
                        f"{self.source}: specialist {spec.name} is granted '{grant}', but the MCP "
                        f"servers are not running"
                    )
            team.append(
                Specialist(
                    name=spec.name,
                    description=spec.description,
                    system_prompt=self.prompts[spec.name],
                    model_role=spec.model_role,
                    tools=tuple(replace(t, max_result_chars=self.model.tools.max_result_chars) for t in tools),
                    max_turns=spec.max_turns,
                    max_tokens=spec.max_tokens,
                    returns_verdict=spec.returns_verdict,
                    fallback=spec.fallback,
                )
            )
        return tuple(team)


def _builtin_tools(settings: ToolSettings, base_dir: Path, granted: set[str]) -> dict[str, Tool]:
    """The built-in tools some specialist is granted, configured by the `[tools]` section.

    Each tool module is imported only when granted: the server imports this module at start-up."""
    tools: dict[str, Tool] = {"calculate": CALCULATE}
    if "fetch_url" in granted:
        from mcp_team.specialists.web import fetch_url_tool

        tools["fetch_url"] = fetch_url_tool(
            allow_private=settings.fetch_allow_private,
            allowed_hosts=settings.fetch_allowed_hosts,
            max_bytes=settings.fetch_max_bytes,
            max_result_chars=settings.max_result_chars,  # its parts fit what the model sees
        )
    if granted & {"read_file", "list_files"}:
        from mcp_team.specialists.files import file_tools

        roots = [(base_dir / d).resolve() for d in settings.read_dirs]
        tools.update((t.name, t) for t in file_tools(roots, max_result_chars=settings.max_result_chars))
    if granted & {"write_note", "read_notes"}:
        from mcp_team.specialists.notes import notes_tools

        tools.update((t.name, t) for t in notes_tools(base_dir / settings.notes_file))
    return tools


def find_team_file(explicit: str | None = None) -> Path | None:
    """`explicit`, else `./team.toml` if it exists, else None (the default team). The CLI and the server pass
    `--team PATH`, else `MCP_TEAM_FILE` (they read the environment; this module does not)."""
    if explicit:
        return Path(explicit)
    local = Path("team.toml")
    return local if local.is_file() else None


def load_team(explicit: str | None = None) -> TeamSpec:
    """The team the server would load. Raises `TeamFileError`."""
    path = find_team_file(explicit)
    if path is None:
        return TeamSpec("built-in default team")
    return load_team_file(path)


def load_team_file(path: Path, *, _stack: tuple[Path, ...] = (), _max_depth: int | None = None) -> TeamSpec:
    """Parse and validate one team file, and the team files it nests. Raises `TeamFileError` listing every
    problem found."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # -sig: a byte-order mark some editors write
    except FileNotFoundError:
        raise TeamFileError(path, ["the file does not exist (create one with `mcp-team init`)"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TeamFileError(path, [f"cannot read the file: {exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise TeamFileError(path, [f"not valid TOML: {exc}"]) from None
    model, problems, left_out = validate(TeamFileModel, data)
    if model is None:
        raise TeamFileError(path, problems)
    base = path.resolve().parent
    found, prompts = check(model, base, left_out)
    max_depth = _max_depth or model.supervisor.max_team_depth
    nested, subteams = load_subteams(model, str(path), base, (*_stack, path.resolve()), max_depth)
    problems += found + [renumbered(p, left_out) for p in nested]
    if problems:
        raise TeamFileError(path, problems)
    return TeamSpec(str(path), model, prompts, base, subteams=subteams)
