"""What the tests of the three ways to install mcp-team share (test_install_*.py): the built dist (once per
test session, by whichever xdist worker comes first), the environment a host gives a server it starts, and
one drive of an installed server over stdio that proves a run has everything it needs.

A host (Claude Desktop, an IDE) starts a stdio server with only HOME, LOGNAME, PATH, SHELL, TERM and USER of
its own environment (the SDK's `get_default_environment`, used here as it is) plus the entry's `env`. The
tests give the server a fresh HOME (where durable runs are kept by default, and where nothing of the
developer's home is found), a PATH without the checkout, and what uv needs to reach the package index.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO, TypeVar, cast

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support import HANG_GUARD

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
UV = VENV_BIN / "uv"  # uv from PyPI: the dev extra installs it into the test's own venv
MCPB_DIR = ROOT / ".cache" / "mcpb"  # the mcpb CLI, pinned in packaging/package.json (`make mcpb-cli`)
MCPB = MCPB_DIR / "node_modules" / ".bin" / "mcpb"
MCPB_PACKAGE = MCPB_DIR / "node_modules" / "@anthropic-ai" / "mcpb"
MCPB_CONFIG = Path(__file__).parents[1] / "mcpb_config.mjs"
UI_DIR = ROOT / "src" / "mcp_team" / "server" / "ui"

PRESET = "portfolio"  # a preset team every drive serves, written by the install's own `mcp-team init --preset`
SERVER_TOOLS = {"run_team", "plan_team", "start_run", "get_run", "cancel_run", "answer_checkpoint"}
RUN_VIEW = "ui://mcp-team/run-view.html"
REQUEST = "Compare two index funds: costs, and what 10,000 grows to at 5% a year over 10 years"
# Minutes, not seconds: a cold uv downloads the dependencies (tens of MB) before the server answers.
INSTALL_TIMEOUT = 600.0

# What the machine running the tests may need for uv to reach the package index (a proxy, its CA bundle, a
# mirror). A host passes none of these; a user behind such a proxy puts them in the server entry's env too.
NETWORK_ENV = (
    "SSL_CERT_FILE", "SSL_CERT_DIR", "UV_NATIVE_TLS", "UV_SYSTEM_CERTS", "UV_INDEX_URL", "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
)  # fmt: skip

T = TypeVar("T")


def load_dist() -> ModuleType:
    """packaging/dist.py, the build `make dist` runs, as a module."""
    spec = importlib.util.spec_from_file_location("mcp_team_dist", ROOT / "packaging" / "dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shared_dir(tmp_path_factory: Any) -> Path:
    """A folder all xdist workers of this test session share (each session has its own)."""
    base = Path(tmp_path_factory.getbasetemp())
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


def once(tmp_path_factory: Any, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)` once per test session, whichever worker comes first; the others wait and get its JSON
    result. A failure is kept too, so every test that needs it fails with the same message, at once."""
    folder = shared_dir(tmp_path_factory) / name
    result = folder.with_suffix(".json")
    with folder.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            try:
                value: Any = {"ok": make(folder)}
            except Exception as exc:  # kept for the other workers: the same failure, without building again
                value = {"error": f"{type(exc).__name__}: {exc}"}
            result.write_text(json.dumps(value, default=str))
        loaded = json.loads(result.read_text())
    if "error" in loaded:
        raise RuntimeError(f"{name}: {loaded['error']}")
    return cast(T, loaded["ok"])


def uv_cache(tmp_path_factory: Any) -> Path:
    """The uv cache of this test session: empty at its start (as on a clean machine), shared by its tests."""
    path = shared_dir(tmp_path_factory) / "uv-cache"
    path.mkdir(exist_ok=True)
    return path


def network_env() -> dict[str, str]:
    return {name: os.environ[name] for name in NETWORK_ENV if os.environ.get(name)}


def install_mcpb_cli() -> None:
    """`make mcpb-cli`: the pinned mcpb CLI into .cache/mcpb (npm ci, once; `make test` did it already)."""
    MCPB_DIR.parent.mkdir(exist_ok=True)
    with (ROOT / ".cache" / "mcpb.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "mcpb-cli"], cwd=ROOT, check=True, timeout=INSTALL_TIMEOUT)


def built_dist(tmp_path_factory: Any) -> dict[str, Path]:
    """`make dist`'s build (packaging/dist.py) of this checkout, once per test session."""

    def build(folder: Path) -> dict[str, str]:
        install_mcpb_cli()
        dist = load_dist()
        env = {"UV_CACHE_DIR": str(uv_cache(tmp_path_factory))}
        with _environ(env):
            built = dist.build(folder, str(UV), str(MCPB), say=lambda _: None)
        return {kind: str(path) for kind, path in built.items()}

    return {kind: Path(path) for kind, path in once(tmp_path_factory, "dist", build).items()}


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def host_path(*first: Path) -> str:
    """The PATH a host passes: the machine's, less anything inside this checkout (its .venv among them)."""
    machine = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    entries = [p for p in machine if not Path(p).resolve().is_relative_to(ROOT)]
    return os.pathsep.join([*(str(p) for p in first), *entries])


def uv_bin(folder: Path) -> Path:
    """A folder holding only uv and uvx (links to the test venv's), to put first on a host's PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("uv", "uvx"):
        link = folder / name
        if not link.exists():
            link.symlink_to(VENV_BIN / name)
    return folder


def host_env(home: Path, path: str, cache: Path, **extra: str) -> dict[str, str]:
    """What the tests put in a server entry's `env`, over the host's own few variables."""
    return {"HOME": str(home), "PATH": path, "UV_CACHE_DIR": str(cache), **network_env(), **extra}


def preset_specialists(team_file: Path) -> set[str]:
    return {s["name"] for s in tomllib.loads(team_file.read_text(encoding="utf-8"))["specialists"]}


async def cli(prefix: list[str], *args: str, env: dict[str, str], cwd: Path) -> str:
    """`mcp-team ARGS` as the install runs it (`prefix` is its way to say `mcp-team`), with only `env`."""
    done = await anyio.run_process([*prefix, *args], env=env, cwd=cwd, check=False)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"{' '.join([*prefix, *args])} exited {done.returncode}:\n{out}\n{err}"
    return out


async def check_install(prefix: list[str], params: StdioServerParameters, home: Path) -> dict[str, Any]:
    """Prove an installed mcp-team has what a run needs, started as `params` says (from outside the checkout,
    with a host's environment): its own `init --preset` writes a team, which the server serves; tools/list,
    prompts, an offline run_team, the run view with every script and stylesheet inlined, a durable run started
    with start_run and followed with get_run; then `runs list` in another process finds both runs on disk
    under HOME. `prefix` runs the install's CLI (e.g. [venv/bin/mcp-team]). Returns what it saw."""
    env = dict(params.env or {})
    team = home / "team.toml"
    await cli(prefix, "init", "--preset", PRESET, str(team), env=env, cwd=home)
    listed = await cli(prefix, "init", "--list", env=env, cwd=home)
    specialists = preset_specialists(team)
    params = params.model_copy(update={"env": {**env, "MCP_TEAM_FILE": str(team)}, "cwd": str(home)})
    seen: dict[str, Any] = {"presets": listed.split()}
    with (home / "server.err").open("w+") as errlog, anyio.fail_after(INSTALL_TIMEOUT):
        try:
            seen.update(await _drive(params, specialists, cast(TextIO, errlog)))
        except BaseException:
            errlog.seek(0)
            print(f"the server's stderr:\n{errlog.read()}", file=sys.stderr)
            raise
    runs = json.loads(await cli(prefix, "runs", "list", "--json", env=env, cwd=home))
    by_id = {run["run_id"]: run for run in runs}
    for run_id in seen["run_ids"]:
        assert by_id.get(run_id, {}).get("status") == "complete", f"run {run_id} not kept complete: {runs}"
    assert (home / ".local" / "state" / "mcp-team").is_dir(), "durable runs are kept under HOME by default"
    return seen


async def _drive(params: StdioServerParameters, specialists: set[str], errlog: TextIO) -> dict[str, Any]:
    async with Client(stdio_client(params, errlog=errlog)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == SERVER_TOOLS | specialists, f"tools: {sorted(tools)}"
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert prompts == {"supervisor"} | specialists, f"prompts: {sorted(prompts)}"

        result = await client.call_tool("run_team", {"request": REQUEST})
        assert not result.is_error and result.structured_content is not None, result.content
        assert result.structured_content["status"] == "complete", result.structured_content
        assert "offline backend" in result.structured_content["answer"]

        view = (await client.read_resource(RUN_VIEW)).contents[0]
        page = getattr(view, "text", "")
        assert view.mime_type == "text/html;profile=mcp-app", view.mime_type
        for part in sorted(UI_DIR.glob("*.js")) + sorted(UI_DIR.glob("*.css")):
            assert part.read_text(encoding="utf-8").strip() in page, f"the run view lacks {part.name}"

        started = await client.call_tool("start_run", {"request": REQUEST})
        assert not started.is_error and started.structured_content is not None, started.content
        run_id = started.structured_content["run_id"]
        with anyio.fail_after(HANG_GUARD):
            while True:
                got = await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 10})
                assert not got.is_error and got.structured_content is not None, got.content
                if got.structured_content["status"] != "running":
                    break
        assert got.structured_content["status"] == "complete", got.structured_content
    return {"tools": sorted(tools), "run_ids": [result.structured_content["run_id"], run_id]}


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
