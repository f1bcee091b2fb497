"""Cold start: spawn to `initialize` result, `mcp-team serve` beside a minimal one-tool MCPServer.

Both are started the same way (a fresh process speaking stdio), alternately, so machine noise
hits both alike. Prints the medians and the ratio (target: at most 1.25x).
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
INIT = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    + "\n"
)


def spawn_to_initialize(command: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MCP_TEAM_"))}
    env["MCP_TEAM_MODEL"] = "offline"
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT.encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(timeout=10)
    if b'"serverInfo"' not in line:
        raise RuntimeError(f"{command[0]} did not answer initialize: {line[:200]!r}")
    return elapsed


def compile_package() -> None:
    """Write mcp_team's bytecode, as `pip install` of a wheel does. An editable install run under
    PYTHONDONTWRITEBYTECODE (set on some CI machines) would otherwise compile every module at each start,
    which no installed server does, while the SDK's site-packages are compiled already."""
    import mcp_team

    compileall.compile_dir(Path(mcp_team.__file__).parent, quiet=1)


def main(runs: int = 10) -> dict[str, float]:
    compile_package()
    ours = [str(BIN / "mcp-team"), "serve"]
    minimal = [sys.executable, str(HERE / "minimal_server.py")]
    spawn_to_initialize(ours), spawn_to_initialize(minimal)  # warm the OS file cache
    times: dict[str, list[float]] = {"mcp-team serve": [], "minimal MCPServer": []}
    for _ in range(runs):
        times["mcp-team serve"].append(spawn_to_initialize(ours))
        times["minimal MCPServer"].append(spawn_to_initialize(minimal))
    medians = {name: statistics.median(t) for name, t in times.items()}
    ratio = medians["mcp-team serve"] / medians["minimal MCPServer"]
    print(f"cold start, spawn to initialize result (median of {runs}, alternating):")
    for name, value in medians.items():
        print(f"  {name:<20} {value * 1000:8.0f} ms")
    verdict = "PASS" if ratio <= 1.25 else "FAIL"
    print(f"  ratio                {ratio:8.2f}x   target <= 1.25x  {verdict}")
    return {"ratio": ratio, **medians}


if __name__ == "__main__":
    main()
