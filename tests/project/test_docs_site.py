"""The documentation: the site builds with `mkdocs build --strict` and says no warning (a broken link or anchor, a
page left out of the navigation), as `make docs` builds it; the README stays a front door, under 200 lines, whose
links all lead somewhere; and nothing that left the README for the site was lost on the way."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import HANG_GUARD, clean_env

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


@pytest.mark.process
def test_the_site_builds_strictly_without_a_warning(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=HANG_GUARD * 2, cwd=ROOT,
        env=clean_env(NO_MKDOCS_2_WARNING="1"),  # Material's notice of its own end of life, as `make docs` has it
    )  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "WARNING" not in said, said
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.stem for p in (tmp_path / "site").glob("*.html")}  # one file a page: the site opens from disk
    assert pages <= built, pages - built


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    # The two set-up commands, exactly as they have always been.
    assert "make demo    # runs the team on a sample request, offline (no API key needed)\n" in text
    assert "make test    # lint, type check and the test suite (what CI runs: .ci/run)\n" in text
    for needed in ("python3", "3.11", "npm", "PostgreSQL 15", "root"):  # what `make test` needs, said
        assert needed in text.split("```sh", 1)[0], needed


def test_every_relative_link_leads_to_a_file() -> None:
    for page in [README, ROOT / "CONTRIBUTING.md"]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (page.parent / target).is_file(), f"{page.name}: {target}"


def test_what_the_readme_said_is_in_the_site() -> None:
    """The README's reference went to docs/ almost word for word: every sentence of it that left is in a page.
    Sampled at the places a careless move loses (a table, a long list, the end of a section)."""
    site = " ".join((ROOT / "docs").joinpath(p).read_text(encoding="utf-8") for p in sorted(
        p.name for p in (ROOT / "docs").glob("*.md")))  # fmt: skip
    site = " ".join(site.split())
    for sentence in [
        "`MCP_TEAM_MAX_CONCURRENCY` | model calls in flight at once, per endpoint",
        "a second SIGTERM is ignored (the cancel is recorded first)",
        "Every tool error (`isError`) reads `Error executing tool NAME: what is wrong`",
        "The takeover resumes the dead replica's runs through DBOS's public API",
        "`benchmarks/load.py` runs 1,000 concurrent runs over HTTP",
        "Trace files of mcp-team before OTLP JSON were Jaeger v1 JSON",
        "the first answer, the client's form or the tool, wins",
        "`tests/recordings/qwen-1.5b/` holds a suite of 22 cases",
    ]:
        assert sentence in site, sentence
