"""The wheel `make dist` builds: it holds every file the code reads from the package, and it runs a team from
a fresh virtualenv outside the checkout and through `uvx --from <wheel>`, started as a host starts a server.

The build (packaging/dist.py) runs once per test session, shared with test_install_bundle.py; the venv is
made once per session too. Both need the package index (PyPI), as a user's install does.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from mcp_team.server.views import ui
from mcp_team.teamfile.starter import PRESETS
from support.install_support import (
    ROOT,
    UV,
    built_dist,
    check_install,
    host_env,
    host_path,
    once,
    uv_bin,
    uv_cache,
)

pytestmark = [
    pytest.mark.process,
    pytest.mark.anyio,
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]
PACKAGE = ROOT / "src" / "mcp_team"

# Every module that reads a file of the package at run time, and the files it reads (paths in the wheel). A
# module that starts reading package files fails `test_every_reader_of_package_files_is_known` until it is
# added here, so the wheel's check below covers its files too.
READERS: dict[str, list[str]] = {
    "server/views/ui/__init__.py": [
        f"mcp_team/server/views/ui/{name}"
        for name in [
            "view.html",
            *ui._STYLESHEET.findall((PACKAGE / "server/views/ui/view.html").read_text()),
            *ui._SCRIPT.findall((PACKAGE / "server/views/ui/view.html").read_text()),
        ]
    ],
    "teamfile/starter.py": [f"mcp_team/teamfile/presets/{name}.toml" for name in PRESETS],
    "evals/suite.py": ["mcp_team/evals/routing.toml"],
}
# How a module reaches its package's files: importlib.resources, or a path built from __file__.
READS_PACKAGE_FILES = re.compile(r"\bresources\b.*\bfiles\b|\bfiles\(|__file__")


def readme_entry() -> dict[str, Any]:
    """The server entry README's "Connect a client" shows first (uvx, on the offline model)."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Connect a client\n", 1)[1].split("\n## ")[0]
    block = re.search(r"```json\n(.*?)```", section, flags=re.S)
    assert block, "README's Connect a client section has no JSON config"
    entry: dict[str, Any] = json.loads(block[1])["mcpServers"]["mcp-team"]
    return entry


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_dist(tmp_path_factory)["wheel"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A virtualenv outside the checkout with the wheel installed (once per test session)."""

    def make(folder: Path) -> str:
        subprocess.run(["python3", "-m", "venv", str(folder)], check=True, timeout=300, cwd=folder.parent)
        subprocess.run(
            [str(UV), "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"), str(wheel)],
            check=True, timeout=600, cwd=folder.parent, capture_output=True, text=True,
            env={**host_env(folder.parent, host_path(), uv_cache(tmp_path_factory))},
        )  # fmt: skip
        return str(folder)

    return Path(once(tmp_path_factory, "wheel-venv", make))


def test_every_reader_of_package_files_is_known() -> None:
    sources = {str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}
    readers = {
        name
        for name, source in sources.items()
        if READS_PACKAGE_FILES.search(source) and READS_PACKAGE_FILES.search(_code_only(source))
    }
    assert readers == set(READERS), "a module reads package files: add it and its files to READERS"


def _code_only(source: str) -> str:
    """`source` without its docstrings and comments (which may name __file__ without reading anything)."""
    tree = ast.parse(source)  # comments are gone once parsed
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            body[0] = ast.Pass()  # type: ignore[index]
    return ast.unparse(tree)


def test_the_wheel_holds_every_file_the_code_reads_and_every_tracked_package_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    read = [name for files in READERS.values() for name in files]
    assert read and not [name for name in read if name not in names]
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "src/mcp_team"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "git lists no files: run the tests in a git checkout"
    assert [path for path in tracked if path.removeprefix("src/") not in names] == []
    assert [name for name in names if "__pycache__" in name or name.endswith(".pyc")] == []
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "mcp-team = mcp_team.cli.main:main" in entry_points


def test_the_installed_package_reads_its_files_from_the_venv_not_the_checkout(venv: Path, tmp_path: Path) -> None:
    code = (
        "import mcp_team, pathlib\n"
        "from mcp_team.server.views import ui\n"
        "from mcp_team.teamfile.starter import PRESETS, preset_text\n"
        "from mcp_team.evals.suite import BUILTIN, load_suite\n"
        "print(pathlib.Path(mcp_team.__file__).resolve())\n"
        "page = ui.page({'mode': 'app', 'runId': None, 'traceUrl': None})\n"
        "assert '<script src=' not in page and '<link rel=' not in page and '<style>' in page, page[:2000]\n"
        "assert all('[[specialists]]' in preset_text(name) for name in PRESETS)\n"
        "assert load_suite(BUILTIN)[0].cases\n"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(venv), done.stdout


async def test_the_wheel_in_a_fresh_venv_runs_a_team_as_a_host_starts_it(
    venv: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    mcp_team = str(venv / "bin" / "mcp-team")  # the absolute path a client's config names
    env = host_env(tmp_path, host_path(), uv_cache(tmp_path_factory), MCP_TEAM_MODEL="offline")
    seen = await check_install([mcp_team], StdioServerParameters(command=mcp_team, args=["serve"], env=env), tmp_path)
    assert set(seen["presets"]) == set(PRESETS)


async def test_uvx_from_the_wheel_runs_a_team_as_a_host_starts_it(
    wheel: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """README's entry (`uvx mcp-team serve`, which needs mcp-team on PyPI) with `--from` the wheel, and uv only
    on PATH."""
    entry = readme_entry()
    assert entry["command"] == "uvx" and entry["args"] == ["mcp-team", "serve"], entry
    assert entry["env"] == {"MCP_TEAM_MODEL": "offline"}, "the first thing to try is the offline model"
    path = host_path(uv_bin(tmp_path / "bin"))
    env = host_env(tmp_path, path, uv_cache(tmp_path_factory), **entry["env"])
    uvx = ["uvx", "--from", str(wheel), "mcp-team"]
    params = StdioServerParameters(command="uvx", args=["--from", str(wheel), *entry["args"]], env=env)
    seen: dict[str, Any] = await check_install(uvx, params, tmp_path)
    assert set(seen["presets"]) == set(PRESETS)
