"""What installing mcp-team costs a user: `.venv/bin/python benchmarks/install.py [--runs N]`.

Builds dist/ as `make dist` does (into a temporary folder), then:
1. the sizes of the wheel and the MCP Bundle (packed and unpacked, and the bundle's file count);
2. the seconds from spawning `uvx --from <wheel> mcp-team serve` to its first answered tools/list, with an
   empty uv cache (what a new user's first start costs: uv downloads and installs the dependencies) and then
   with that cache warm;
3. the same for the unpacked bundle, started as its manifest says (`uv run --frozen --directory <bundle>`).

Each start is spawned as a host spawns a server (the SDK's stdio client: a few variables of this environment,
plus HOME, PATH with uv, UV_CACHE_DIR and what uv needs to reach the index). It needs the package index, and
its cold figures are mostly download time: they vary with the network, not with the code.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.install_support import (
    MCPB,
    MCPB_CONFIG,
    MCPB_PACKAGE,
    UV,
    dir_size,
    host_env,
    host_path,
    load_dist,
    uv_bin,
)


async def seconds_to_tools_list(params: StdioServerParameters, errlog: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            tools = (await client.list_tools()).tools
            return time.perf_counter() - started, len(tools)


def measure(label: str, params_for: Callable[[Path], StdioServerParameters], runs: int, work: Path) -> None:
    """`runs` cold starts (each with a new, empty uv cache), each followed by a warm one on that cache."""
    cold, warm = [], []
    for i in range(runs):
        cache = work / f"cache-{label}-{i}"
        params = params_for(cache)
        took, tools = anyio.run(seconds_to_tools_list, params, work / f"{label}-{i}-cold.err")
        cold.append(took)
        took_warm, _ = anyio.run(seconds_to_tools_list, params, work / f"{label}-{i}-warm.err")
        warm.append(took_warm)
        print(f"  {label} run {i + 1}: cold {took:.1f} s, warm {took_warm:.1f} s ({tools} tools); "
              f"cache {dir_size(cache) / 1e6:.0f} MB")  # fmt: skip
        shutil.rmtree(cache, ignore_errors=True)
    print(f"{label}: first tools/list, empty uv cache: median {statistics.median(cold):.1f} s "
          f"({min(cold):.1f}..{max(cold):.1f}); warm: median {statistics.median(warm):.1f} s")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="cold starts of each kind (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-team-install-bench-") as tmp:
        work = Path(tmp)
        built = load_dist().build(work / "dist", str(UV), str(MCPB), say=lambda _: None)
        wheel, bundle = built["wheel"], built["bundle"]
        unpacked = work / "bundle"
        subprocess.run([str(MCPB), "unpack", str(bundle), str(unpacked)], check=True, capture_output=True)
        files = sum(1 for p in unpacked.rglob("*") if p.is_file())
        print(f"wheel  {wheel.name}: {wheel.stat().st_size / 1e3:.0f} KB")
        print(f"bundle {bundle.name}: {bundle.stat().st_size / 1e3:.0f} KB packed, "
              f"{dir_size(unpacked) / 1e6:.1f} MB unpacked, {files} files")  # fmt: skip

        home = work / "home"
        home.mkdir()
        path = host_path(uv_bin(work / "bin"))

        def uvx(cache: Path) -> StdioServerParameters:
            env = host_env(home, path, cache, MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(work / "state"))
            return StdioServerParameters(command="uvx", args=["--from", str(wheel), "mcp-team", "serve"], env=env)

        config = json.loads(subprocess.run(
            ["node", str(MCPB_CONFIG), str(MCPB_PACKAGE), str(unpacked), str(home), "model=offline"],
            check=True, capture_output=True, text=True,
        ).stdout)  # fmt: skip

        def uv_run(cache: Path) -> StdioServerParameters:
            shutil.rmtree(unpacked / ".venv", ignore_errors=True)  # a first start makes the bundle's venv
            env = {**host_env(home, path, cache, MCP_TEAM_STATE_DIR=str(work / "state")), **config["env"]}
            return StdioServerParameters(command=config["command"], args=config["args"], env=env)

        measure("uvx --from <wheel>", uvx, args.runs, work)
        measure("bundle (uv run)", uv_run, args.runs, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
