"""What the browser tests need, installed on first use: Debian's headless `chromium` (driven by Playwright,
never a browser of Playwright's own) and the test MCP Apps host page (`run_view_host/`, bundled with
esbuild from npm packages, opened in a browser page by `open_in_host`); screenshots go to `ARTIFACTS`.

On a clean Debian machine (CI runs as root) the missing parts are installed with apt-get and npm; a
machine where that is not possible gets an error saying what to install, never a skipped test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOST_DIR = Path(__file__).parents[1] / "run_view_host"
ARTIFACTS = Path(os.environ.get("MCP_TEAM_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))


def _apt_install(*packages: str) -> None:
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if os.geteuid() != 0:
        raise RuntimeError(f"the browser tests need {' '.join(packages)}: run `sudo {' '.join(command)}`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(command, env=env, capture_output=True).returncode == 0:
        return
    # A clean machine has no package lists yet.
    subprocess.run(["apt-get", "update", "-q"], env=env, check=True, capture_output=True)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def ensure_chromium() -> str:
    """The path of Debian's chromium, installed if missing."""
    if not CHROMIUM.exists():
        _apt_install("chromium")
    return str(CHROMIUM)


def host_bundle() -> str:
    """The test host page's script: `run_view_host/host.js` bundled with its npm packages (installed
    from the lock file when missing or stale)."""
    npm = shutil.which("npm")
    if npm is None:
        _apt_install("nodejs", "npm")
        npm = shutil.which("npm") or "npm"
    lock, installed = HOST_DIR / "package-lock.json", HOST_DIR / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        # --ignore-scripts: no package runs code at install; esbuild finds its binary package without it.
        _run(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
    esbuild = str(HOST_DIR / "node_modules" / ".bin" / "esbuild")
    return _run(esbuild, "host.js", "--bundle", "--format=esm", "--platform=browser", "--log-level=warning")


def open_in_host(page: Page, server: str, bundle: str, request: str, token: str = "") -> None:
    """Load the test MCP Apps host page, which shows the view and calls run_team with `request`. The host
    page is fulfilled in the browser, on the server's origin: the server has no test route."""

    def host_page(route: Route) -> None:
        if route.request.url.split("?")[0].endswith("/host.js"):
            route.fulfill(body=bundle, content_type="text/javascript")
        else:
            body = '<!doctype html><meta charset="utf-8"><div id="slot"></div>'
            route.fulfill(body=body + '<script type="module" src="host.js"></script>', content_type="text/html")

    page.route(f"{server}/__host/**", host_page)
    page.goto(f"{server}/__host/index.html?" + urlencode({"request": request, "token": token}))


def _run(*command: str) -> str:
    done = subprocess.run(command, cwd=HOST_DIR, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (in {HOST_DIR}):\n{done.stderr}")
    return done.stdout
