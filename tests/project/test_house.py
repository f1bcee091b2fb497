"""The house keeps its shape (issue 36): read from the source's own imports, every one (at the top, inside a
function, or for type checking only), as a reader meets them.

- Folders depend one way: cli -> server -> runs / evals / teamfile -> handoffs -> specialists -> llm, with
  telemetry and errors below all of them (the package's `__init__`, the library's front door, may name any).
- No import circle, except a team inside a team: a sub-team's run is a run (handoffs/subteam.py ->
  orchestration.py) and a team file may hold team files (teamfile/subteams.py -> loading.py).
- No module over 400 lines (a few just over it are listed, each with its ceiling, to be split, not to grow).
- Settings are read at the edge: tests/project/test_settings_at_the_edge.py.
- Dependencies through their public doors: no private OpenTelemetry span, the MCP SDK's low-level server only
  in server/lowlevel.py, no exact pin among the package's dependencies.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "mcp_team"
PYPROJECT = SRC.parents[1] / "pyproject.toml"
FLOOR = {"cli": 7, "server": 6, "runs": 5, "evals": 5, "teamfile": 5, "handoffs": 4, "specialists": 3, "llm": 2,
         "telemetry": 1, "errors": 0, "": 0}  # fmt: skip  # "": the package itself (its version)
RECURSION = {("mcp_team.handoffs.subteam", "mcp_team.handoffs.orchestration"),
             ("mcp_team.teamfile.subteams", "mcp_team.teamfile.loading")}  # fmt: skip
LINES = 400
OVER: dict[str, int] = {}  # modules allowed over 400 lines, with a ceiling each: none now


def modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (any import, anywhere in it)."""
    mods = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcp_team"):
                # `from pkg import sub` imports the module sub; `from pkg import name`, the package pkg
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [node.module, *subs]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges[name].update(t for t in targets if t in mods and t != name)
    return edges


def folder(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_folders_depend_one_way() -> None:
    edges = imports()
    up = [(a, b) for a, targets in edges.items() for b in targets
          if folder(a) and folder(a) != folder(b) and FLOOR.get(folder(b), 9) > FLOOR.get(folder(a), 9)]  # fmt: skip
    assert not up, up


def test_no_import_circle_but_a_team_inside_a_team() -> None:
    edges = imports()
    for a, b in RECURSION:
        assert b in edges[a], f"{a} no longer imports {b}: take it out of RECURSION"
        edges[a].discard(b)
    assert not circles(edges)


def test_a_circle_is_found() -> None:  # the check above can fail
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_modules_stay_small() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > LINES}
    assert {name for name in long if long[name] > OVER.get(name, LINES)} == set(), long


def test_dependencies_through_their_public_doors() -> None:
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"\b_Span\b", text), path  # the OpenTelemetry SDK's private span class
        if path.name != "lowlevel.py":
            assert "_lowlevel_server" not in text, path
    pins = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert not [p for p in pins if "==" in p], pins
    assert all("<" in p for p in pins), [p for p in pins if "<" not in p]  # a range: a major release is a choice
