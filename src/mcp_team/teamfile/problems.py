"""What is wrong with a team file, every problem in one go: the schema's errors (`describe`), and the checks a
schema cannot make (`check`: duplicate and reserved names, unknown tools, models, members and MCP servers,
prompt files).

A file with schema errors is still checked: `validate` leaves out each key or entry with an error and
validates the rest, and `check` runs on that, told by `LeftOut` what was left out (so that a member
left out is not also called unknown). Else a user fixed the schema's errors only to be shown the others.
That holds for a whole table or list left out too (`[specialists.NAME]` for `[[specialists]]`, every
specialist broken): the rest is checked without it, and a name it may have held is never called unknown.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, ValidationError, create_model

from mcp_team.errors import message_of
from mcp_team.handoffs.checkpoints import checkpoint_problems
from mcp_team.llm.call import MEMBER_NAMES
from mcp_team.llm.settings import parse_model
from mcp_team.specialists.definition import NAME_RULE

if TYPE_CHECKING:
    from mcp_team.specialists.mcp_config import McpServerConfig
    from mcp_team.teamfile.schema import TeamFileModel

Model = TypeVar("Model", bound=BaseModel)

BUILTIN_TOOLS = ("calculate", "fetch_url", "read_file", "list_files", "write_note", "read_notes")
# A specialist's name is also its MCP tool's and prompt's: these are the server's own tools (tools.py, run_tools.py,
# checkpoint_tools.py) and the names of the team's own members (the supervisor's prompt is `supervisor`).
RESERVED_NAMES = ("run_team", "plan_team", "start_run", "get_run", "cancel_run", "answer_checkpoint", *MEMBER_NAMES)

KeyPath = tuple[str | int, ...]  # a key path in the file, as pydantic's `loc`: ("specialists", 2, "tools")


@dataclass(frozen=True)
class LeftOut:
    """What a file's schema errors took out of the model the checks see (nothing, for a valid file).

    `positions` gives each kept entry of `specialists` and `mcp_servers` its index in the file, so a
    problem names the entry as the file has it; `members` and `servers` are the names of the entries
    left out; `keys` the key paths left out (file indices). `unnamed` holds the sections that lost an entry
    whose name cannot be read (not a table, the whole list): any name may have been there."""

    positions: dict[str, list[int]] = field(default_factory=dict)
    members: frozenset[str] = frozenset()
    servers: frozenset[str] = frozenset()
    keys: frozenset[KeyPath] = frozenset()
    unnamed: frozenset[str] = frozenset()

    def unknown_member(self, name: str, known: Collection[str]) -> bool:
        """Whether `name` is surely no member: not among `known`, nor perhaps in an entry left out."""
        return name not in known and "specialists" not in self.unnamed

    def unknown_server(self, name: str, known: Collection[str]) -> bool:
        """Whether `name` is surely no declared MCP server (see `unknown_member`)."""
        return name not in known and name not in self.servers and "mcp_servers" not in self.unnamed

    def at(self, section: str, i: int) -> int:
        """The file's index of the `i`th entry kept of `section`."""
        kept = self.positions.get(section)
        return kept[i] if kept is not None else i

    def in_file(self, loc: KeyPath) -> KeyPath:
        """`loc` of the model validated without the entries left out, by the file's indices."""
        if len(loc) > 1 and loc[0] in self.positions and isinstance(loc[1], int):
            return (loc[0], self.at(str(loc[0]), loc[1]), *loc[2:])
        return loc

    def covers(self, *path: str | int) -> bool:
        """Whether `path` (file indices), or a table holding it, was left out."""
        return any(path[:n] in self.keys for n in range(1, len(path) + 1))


_LISTS = ("specialists", "mcp_servers")  # the lists whose entries are left out one by one
_GONE = object()  # an entry left out holds its place, so that the entries after it keep their indices


def validate(schema: type[Model], data: dict[str, Any]) -> tuple[Model | None, list[str], LeftOut]:
    """The file's model; with schema errors, those and a model of the rest, with what was left out. No model
    when nothing could be left out (an error of the file as a whole: the schema's errors are all there is)."""
    try:
        return schema.model_validate(data), [], LeftOut()
    except ValidationError as exc:
        errors = exc.errors()
    problems = [describe(e) for e in errors]
    work, keys, left_out = copy.deepcopy(data), set[KeyPath](), LeftOut()
    rest = _lenient(schema)  # the rest may have no specialist left: its checks still run
    for _ in range(4):  # leaving out a required key makes its table wrong, and so on up: a few rounds at most
        if not all(_leave_out(work, left_out.in_file(tuple(e["loc"])), keys) for e in errors):
            break
        kept, left_out = _rest(work, data, keys)
        try:
            return rest.model_validate(kept), problems, left_out
        except ValidationError as exc:
            errors = exc.errors()
    return None, problems, LeftOut()


@functools.cache
def _lenient(schema: type[Model]) -> type[Model]:
    """`schema` with its lists (`_LISTS`) optional and maybe empty, for the rest of a file with errors (never
    a file that loads: its errors are problems already)."""
    lists: dict[str, Any] = {
        name: (schema.model_fields[name].annotation, Field(default_factory=list))
        for name in _LISTS
        if name in schema.model_fields
    }
    return create_model(schema.__name__, __base__=schema, **lists)


def _leave_out(work: dict[str, Any], loc: KeyPath, keys: set[KeyPath]) -> bool:
    """Take out of `work` the deepest key or entry of `loc` it has; False when that would be the whole file."""
    node: Any = work
    path: list[str | int] = []
    for part in loc:
        if not ((isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int))):
            break
        if (node := node[part]) is _GONE:  # type: ignore[index]
            return True  # its entry is out already
        path.append(part)
    # Of a list inside an entry the whole list goes: the checks name its items by index (`tools[1]`).
    if (inner := next((n for n, p in enumerate(path) if isinstance(p, int) and n > 1), None)) is not None:
        path = path[:inner]
    if not path:  # a required key the file lacks has nothing to leave out; the file as a whole cannot go
        return bool(loc) and loc[0] not in work
    keys.add(tuple(path))
    parent: Any = work
    for part in path[:-1]:
        parent = parent[part]
    if isinstance(parent, list):
        parent[int(path[-1])] = _GONE
    else:
        del parent[path[-1]]
    return True


def _rest(work: dict[str, Any], data: dict[str, Any], keys: set[KeyPath]) -> tuple[dict[str, Any], LeftOut]:
    """`work` without the entries left out, and what was left out (the entries' names as `data` has them)."""
    kept, positions, names, unnamed = dict(work), {}, {}, set()
    for section in _LISTS:
        if isinstance(entries := work.get(section), list):
            positions[section] = [i for i, entry in enumerate(entries) if entry is not _GONE]
            kept[section] = [entry for entry in entries if entry is not _GONE]
            gone = [data[section][i] for i, entry in enumerate(entries) if entry is _GONE]
            names[section] = frozenset(
                g["name"] for g in gone if isinstance(g, dict) and isinstance(g.get("name"), str)
            )
            if len(names[section]) < len(gone):
                unnamed.add(section)
        elif (section,) in keys and data.get(section):  # the whole list, holding something: names unknown
            unnamed.add(section)
    none: frozenset[str] = frozenset()
    return kept, LeftOut(
        positions, names.get("specialists", none), names.get("mcp_servers", none), frozenset(keys), frozenset(unnamed)
    )


def renumbered(problem: str, left_out: LeftOut) -> str:
    """A problem the checks said by the kept entries' indices (`specialists[i]...`), by the file's."""
    head, _, rest = problem.partition("]")
    section, _, index = head.partition("[")
    if section not in _LISTS or not index.isdigit():
        return problem
    return f"{section}[{left_out.at(section, int(index))}]{rest}"


def describe(error: Any) -> str:
    """One pydantic error as `key.path[0]: what is wrong`."""
    loc = ""
    for part in error["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    message = message_of(error)
    if error["type"] == "extra_forbidden":
        message = "unknown key (check the spelling; `mcp-team init` writes a commented example)"
    elif error["type"] == "string_pattern_mismatch":
        message = f"'{error['input']}' cannot be a name: use {NAME_RULE} (it is also a tool's name)"
    elif error["type"] == "missing":
        message = "is required"
    elif error["type"] == "list_type" and loc in _LISTS and isinstance(error["input"], dict):
        message += f"; write each entry as a [[{loc}]] table, not [{loc}.NAME]"
    return f"{loc or 'the file'}: {message}"


def check(model: TeamFileModel, base: Path, left_out: LeftOut | None = None) -> tuple[list[str], dict[str, str]]:
    """The problems a schema cannot see, and the specialists' prompts (name -> text) read on the way."""
    out = left_out or LeftOut()
    problems: list[str] = []
    prompts: dict[str, str] = {}
    servers = {s.name: s for s in model.mcp_servers}
    for i, server in enumerate(model.mcp_servers):
        if [s.name for s in model.mcp_servers].count(server.name) > 1:
            at = out.at("mcp_servers", i)
            problems.append(f"mcp_servers[{at}].name: '{server.name}' is declared more than once")
    names = [s.name for s in model.specialists]
    known = [*names, *sorted(out.members - set(names))]  # a member left out is there, with its own problem
    checkpoints = model.supervisor.checkpoints
    # A checkpoint's member may be one left out without a name: only its form is checked then.
    maybe = [c.removeprefix("before:") for c in checkpoints if not out.unknown_member(c.removeprefix("before:"), known)]
    problems += [f"supervisor.checkpoints: {p}" for p in checkpoint_problems(checkpoints, [*known, *maybe])]
    if model.supervisor.judge is not None and out.unknown_member(model.supervisor.judge, known):
        problems.append(f"supervisor.judge: there is no member '{model.supervisor.judge}' ({', '.join(names)})")
    for key in ("supervisor", "specialist", "supervisor_fallback", "specialist_fallback"):
        problems += _model_problems(f"models.{key}", getattr(model.models, key))
    seen: set[str] = set()
    for i, spec in enumerate(model.specialists):
        at = out.at("specialists", i)
        where = f"specialists[{at}]"
        if spec.name in seen:
            problems.append(f"{where}.name: '{spec.name}' is used by another specialist; names must be unique")
        seen.add(spec.name)
        if spec.name in RESERVED_NAMES:
            problems.append(f"{where}.name: '{spec.name}' is taken by the server; choose another name")
        if spec.team is not None or out.covers("specialists", at, "team"):
            if spec.prompt is not None or spec.prompt_file is not None or spec.tools:
                problems.append(f"{where}: a member that is a team has no prompt, prompt_file or tools of its own")
            continue
        if (spec.prompt is None) == (spec.prompt_file is None):
            if not (out.covers("specialists", at, "prompt") or out.covers("specialists", at, "prompt_file")):
                problems.append(f"{where}: give exactly one of `prompt` (inline) or `prompt_file` (a path)")
        elif spec.prompt_file is not None:
            prompt_path = base / spec.prompt_file
            try:
                prompts[spec.name] = prompt_path.read_text(encoding="utf-8-sig").strip()
            except OSError:
                problems.append(f"{where}.prompt_file: cannot read '{spec.prompt_file}' (looked at {prompt_path})")
            except UnicodeDecodeError as exc:
                problems.append(
                    f"{where}.prompt_file: '{spec.prompt_file}' is not UTF-8 text (byte {exc.start}); save it as UTF-8"
                )
        else:
            prompts[spec.name] = (spec.prompt or "").strip()
        if spec.name in prompts and not prompts[spec.name]:
            problems.append(f"{where}: the prompt is empty")
        if spec.fallback is not None and (spec.fallback == spec.name or out.unknown_member(spec.fallback, known)):
            problems.append(
                f"{where}.fallback: '{spec.fallback}' must be another specialist of this team ({', '.join(names)})"
            )
        for key in ("model", "fallback_model"):
            problems += _model_problems(f"{where}.{key}", getattr(spec, key))
        for j, grant in enumerate(spec.tools):
            problems.extend(_check_grant(f"{where}.tools[{j}]", grant, servers, out))
        reads = {"read_file", "list_files"} & set(spec.tools)
        if reads and not model.tools.read_dirs and not out.covers("tools", "read_dirs"):
            problems.append(
                f"{where}.tools: read_file/list_files are granted but tools.read_dirs is empty; "
                f"list the directories they may read"
            )
        if len(set(spec.tools)) != len(spec.tools):
            problems.append(f"{where}.tools: a tool is listed more than once")
    return problems, prompts


def _model_problems(where: str, text: str | None) -> list[str]:
    try:
        parse_model(text) if text is not None else None
    except ValueError as exc:
        return [f"{where}: {exc}"]
    return []


def _check_grant(where: str, grant: str, servers: dict[str, McpServerConfig], out: LeftOut) -> list[str]:
    if "/" not in grant:
        if grant in BUILTIN_TOOLS:
            return []
        return [
            f"{where}: unknown tool '{grant}'; built-in tools are {', '.join(BUILTIN_TOOLS)}, and tools of an "
            f"MCP server are granted as 'server/tool' or 'server/*'"
        ]
    server, _, name = grant.partition("/")
    if server not in servers:
        if not out.unknown_server(server, servers):  # perhaps declared, with a problem of its own said already
            return []
        known = ", ".join(servers) or "none are declared"
        return [f"{where}: '{grant}' names MCP server '{server}', which is not declared in [[mcp_servers]] ({known})"]
    allowed = servers[server].allowed_tools
    if name != "*" and allowed is not None and name not in allowed:
        return [f"{where}: '{name}' is not in mcp_servers '{server}' allowed_tools ({', '.join(allowed)})"]
    return []
