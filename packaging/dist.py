"""Build what mcp-team ships, into one folder (`make dist` runs it into dist/):

- the sdist and the wheel (`uv build`: hatchling, the sdist first and the wheel from it);
- the MCP Bundle `mcp-team-<version>.mcpb` (server type `uv`): the sdist's pyproject.toml, README.md and src/,
  this folder's manifest.json and .mcpbignore, and a uv.lock made here, so that `uv run --frozen` on the
  user's machine installs the versions checked at build time; validated and packed with the mcpb CLI;
- `server.json`, the MCP Registry entry, naming the PyPI package and the bundle (with its SHA-256).

The version comes from one place, `__version__` in src/mcp_team/__init__.py: hatchling reads it into the
wheel, and this script reads it back from the wheel's metadata and writes it into manifest.json and
server.json, whose `{version}` placeholders stand for it (and `{mcpb_sha256}` for the bundle's hash).

    python packaging/dist.py [--out dist] [--uv PATH] [--mcpb PATH]

Needs uv (`pip install uv`: the dev extra has it) and the mcpb CLI (`make mcpb-cli` puts it in .cache/mcpb).
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MCPB = ROOT / ".cache" / "mcpb" / "node_modules" / ".bin" / "mcpb"

# What a uv-type bundle must carry: uv builds the project from pyproject.toml (whose `readme` makes README.md
# needed too), installs the locked versions (uv.lock, for --frozen), and runs the server from src/.
BUNDLE_FILES_FROM_SDIST = ("pyproject.toml", "README.md")
BUNDLE_FOLDER_FROM_SDIST = "src/"
BUNDLE_MUST_HOLD = ("manifest.json", "pyproject.toml", "README.md", "uv.lock", "src/mcp_team/__init__.py")
BUNDLE_MUST_NOT_HOLD = (".venv/", "__pycache__/", ".pyc")


class DistError(Exception):
    """A step of the build failed; the message says which and why."""


def fill(template: Any, values: dict[str, str]) -> Any:
    """`template` (parsed JSON) with every `{name}` in its strings replaced by `values[name]`."""
    if isinstance(template, dict):
        return {key: fill(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [fill(item, values) for item in template]
    if isinstance(template, str):
        for name, value in values.items():
            template = template.replace("{" + name + "}", value)
    return template


def manifest(version: str) -> dict[str, Any]:
    """The bundle's manifest.json for `version`."""
    return dict(fill(json.loads((HERE / "manifest.json").read_text(encoding="utf-8")), {"version": version}))


def server_json(version: str, mcpb_sha256: str) -> dict[str, Any]:
    """The MCP Registry entry for `version`, whose bundle has the SHA-256 `mcpb_sha256`."""
    template = json.loads((HERE / "server.json").read_text(encoding="utf-8"))
    return dict(fill(template, {"version": version, "mcpb_sha256": mcpb_sha256}))


def wheel_version(wheel: Path) -> str:
    """The version in a wheel's METADATA (what hatchling read from `__version__`)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"), headersonly=True)
    return str(metadata["Version"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(what: str, command: list[str], cwd: Path | None = None) -> str:
    """Run a step; its output is shown only when it fails, with the step's name."""
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError as exc:
        raise DistError(f"{what}: {command[0]} not found ({exc})") from None
    if done.returncode != 0:
        raise DistError(f"{what} failed ({' '.join(command)}, exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def untracked_sources() -> list[str]:
    """Files under src/ that git neither tracks nor ignores: hatchling would put them in the wheel and sdist."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        return []
    out = _run("git status", ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "src"])
    return [line[3:] for line in out.splitlines() if line.startswith("??")]


def build_packages(out: Path, uv: str) -> tuple[Path, Path]:
    """The sdist and the wheel, built by uv (with hatchling) into `out`."""
    _run("uv build", [uv, "build", "--quiet", "--out-dir", str(out), str(ROOT)])
    sdists, wheels = sorted(out.glob("mcp_team-*.tar.gz")), sorted(out.glob("mcp_team-*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise DistError(f"uv build left {[p.name for p in out.iterdir()]} in {out}; expected one sdist and one wheel")
    return sdists[0], wheels[0]


def stage_bundle(sdist: Path, stage: Path, version: str, uv: str) -> None:
    """Lay out the bundle's files in `stage`: the sdist's sources, the manifest, .mcpbignore and uv.lock."""
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            inner = member.name.partition("/")[2]  # below the sdist's top folder, mcp_team-<version>/
            if member.isfile() and (inner in BUNDLE_FILES_FROM_SDIST or inner.startswith(BUNDLE_FOLDER_FROM_SDIST)):
                target = stage / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                assert source is not None  # a regular file
                target.write_bytes(source.read())
    (stage / "manifest.json").write_text(json.dumps(manifest(version), indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(HERE / ".mcpbignore", stage / ".mcpbignore")
    _run("uv lock (the bundle's locked versions)", [uv, "lock", "--quiet", "--directory", str(stage)])


def check_bundle(bundle: Path) -> int:
    """The bundle's file count; fails when it lacks a file it needs or carries an environment or bytecode."""
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
    missing = [name for name in BUNDLE_MUST_HOLD if name not in names]
    unwanted = [name for name in names if any(bad in name for bad in BUNDLE_MUST_NOT_HOLD)]
    if missing or unwanted:
        raise DistError(f"{bundle.name}: missing {missing}, should not hold {unwanted[:5]}")
    return len(names)


def build(out: Path, uv: str, mcpb: str, say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build everything into `out` (created; it must not hold anything yet). Returns the paths by kind."""
    # A path to a tool works from any folder (mcpb pack runs inside the stage); a bare name is looked up on PATH.
    uv, mcpb = (str(Path(tool).absolute()) if "/" in tool else tool for tool in (uv, mcpb))
    if out.exists() and any(out.iterdir()):
        raise DistError(f"{out} is not empty: remove it first (make dist does)")
    out.mkdir(parents=True, exist_ok=True)
    if stray := untracked_sources():
        say(f"warning: files under src/ that git does not track go into the wheel too: {', '.join(stray[:5])}")
    sdist, wheel = build_packages(out, uv)
    version = wheel_version(wheel)
    bundle = out / f"mcp-team-{version}.mcpb"
    with tempfile.TemporaryDirectory(prefix="mcp-team-bundle-") as tmp:
        stage = Path(tmp)
        stage_bundle(sdist, stage, version, uv)
        _run("mcpb validate", [mcpb, "validate", str(stage / "manifest.json")])
        # From inside the stage: the CLI lists the archive's files with wrong paths otherwise.
        _run("mcpb pack", [mcpb, "pack", ".", str(bundle.resolve())], cwd=stage)
    files = check_bundle(bundle)
    registry = out / "server.json"
    registry.write_text(json.dumps(server_json(version, sha256(bundle)), indent=2) + "\n", encoding="utf-8")
    built = {"sdist": sdist, "wheel": wheel, "bundle": bundle, "server.json": registry}
    for kind, path in built.items():
        extra = f", {files} files" if kind == "bundle" else ""
        say(f"{kind:12} {path}  ({path.stat().st_size:,} bytes{extra})")
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where to build (default: dist/)")
    parser.add_argument("--uv", default=shutil.which("uv") or str(Path(sys.executable).parent / "uv"))
    parser.add_argument("--mcpb", default=str(MCPB), help="the mcpb CLI (default: .cache/mcpb's)")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.uv, args.mcpb)
    except DistError as exc:
        print(f"dist: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
