"""Where DBOS may be used, and how: the engine (handoffs/, specialists/, llm/) never imports it, nothing of mcp-team
touches a private name of it (an underscored module or attribute: durable runs use DBOS's public API only), and a
run service kept in memory never loads it at all.

Read from the code itself (its imports and attribute uses, parsed), and from a process that runs an ephemeral run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process]

SRC = Path(__file__).parents[2] / "src" / "mcp_team"
ENGINE = ("handoffs", "specialists", "llm")


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(SRC.rglob("*.py"))]


def _imports(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def test_the_engine_imports_nothing_of_dbos() -> None:
    found = {
        f"{path.relative_to(SRC)}: {name}"
        for path, tree in _modules()
        if path.relative_to(SRC).parts[0] in ENGINE
        for name in _imports(tree)
        if name == "dbos" or name.startswith("dbos.")
    }
    assert not found, found


def test_no_module_touches_a_private_name_of_dbos() -> None:
    found = set()
    for path, tree in _modules():
        where = path.relative_to(SRC)
        found |= {f"{where}: import {name}" for name in _imports(tree) if name.startswith("dbos._")}
        aliases = set()  # the names this module binds to DBOS's package or its public objects
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "dbos"}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dbos":
                aliases |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):  # DBOS._something, dbos._module: an attribute of a name bound to DBOS
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                found.add(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, found


def test_a_run_in_memory_never_loads_dbos_or_sqlalchemy() -> None:
    script = """
import sys, anyio
from mcp_team.handoffs import Team
from mcp_team.llm import ModelSet
from mcp_team.llm.offline import OfflineModel
from mcp_team.runs import open_runs
from mcp_team.runs.team_engine import TeamEngine
from mcp_team.runs.types import RunRequest

async def main():
    engine = TeamEngine(Team(ModelSet.single(OfflineModel())))
    async with open_runs(None, engine) as runs:
        record = await runs.run(RunRequest(request="Research bees"))
    print(record.status, sorted(m for m in sys.modules if m.split(".")[0] in ("dbos", "sqlalchemy")))

anyio.run(main)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "complete []", proc.stdout


def test_children_started_at_once_are_numbered_in_the_order_their_tasks_begin(tmp_path: Path) -> None:
    """runs/branches.py starts a fan-out's child workflows at once, one task each, and relies on DBOS taking the
    parent's step id for a child before `start_workflow_async` first awaits: then the ids follow the order the
    tasks begin in, the same on every replay. A DBOS release that takes it later fails here (the run itself would
    stop as diverged rather than mix up branches)."""
    script = f"""
import anyio, sys
from dbos import DBOS, SetWorkflowID

@DBOS.workflow(name="child")
async def child(n: int) -> int:
    await anyio.sleep(0.001 * (8 - n))
    return n

@DBOS.workflow(name="parent")
async def parent() -> list[str]:
    started = []
    async def start(n: int) -> None:
        with SetWorkflowID(f"p/c{{n}}"):
            handle = await DBOS.start_workflow_async(child, n)
        started.append(handle.get_workflow_id())
    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(start, n)
    return started

async def main() -> None:
    DBOS(config={{"name": "order", "system_database_url": "sqlite:///{tmp_path / "dbos.sqlite"}",
                  "enable_otlp": False, "log_level": "ERROR"}})
    DBOS.launch()
    try:
        with SetWorkflowID("p"):
            await (await DBOS.start_workflow_async(parent)).get_result()
        steps = await DBOS.list_workflow_steps_async("p")
        print(" ".join(step["child_workflow_id"] for step in sorted(steps, key=lambda s: s["function_id"])
                       if step["child_workflow_id"]))
    finally:
        DBOS.destroy()

anyio.run(main)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"p/c{n}" for n in range(8)], proc.stdout
