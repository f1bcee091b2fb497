"""`mcp-team serve --http` in a subprocess on a free port of 127.0.0.1, as a user starts it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

MCP_TEAM = str(Path(sys.executable).parent / "mcp-team")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without model keys or mcp-team settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MCP_TEAM_", "OTEL_"))}
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_http(**env: str) -> Iterator[str]:
    """Serve with `env` (on top of a clean environment); yields the base URL once /healthz answers."""
    port = free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [MCP_TEAM, "serve", "--http", "--port", str(port)], env=clean_env(**env), stdout=log, stderr=log
        )
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"mcp-team serve --http exited: {log.read().decode(errors='replace')}")
                time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
