"""The MCP Registry entry (packaging/server.json, filled in by packaging/dist.py) against the registry's published
schema, and the rules the registry enforces that the schema only describes: one exact version (the package's),
the PyPI package's name, the bundle's URL and hash, and the `mcp-name:` line in the README by which the registry
checks that the PyPI package is ours.

The schema is shipped in tests/fixtures: a byte-for-byte copy of
https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json (its SHA-256 is pinned below;
that host is out of this machine's reach). Moving to a newer schema is deliberate: replace both together.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator

import mcp_team
from support.install_support import ROOT, load_dist

pytestmark = [pytest.mark.process]

SCHEMA_FILE = Path(__file__).parents[1] / "fixtures" / "server.schema.2025-12-11.json"
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
# The schema says "Version ranges are rejected" but enforces only `not: {const: latest}`; the registry the rest.
VERSION_RANGE = re.compile(r"[\^~<>=*\s]|(^|\.)[xX](\.|$)|^latest$")
BUNDLE_SHA256 = hashlib.sha256(b"a bundle").hexdigest()


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    data = SCHEMA_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256, "the schema file is not the published one"
    loaded: dict[str, Any] = json.loads(data)
    return loaded


@pytest.fixture(scope="module")
def entry() -> dict[str, Any]:
    filled: dict[str, Any] = load_dist().server_json(mcp_team.__version__, BUNDLE_SHA256)
    return filled


def problems(doc: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)  # the schema is draft-07
    return [f"{'/'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_entry_is_valid_against_the_schema_it_names(entry: dict[str, Any], schema: dict[str, Any]) -> None:
    assert entry["$schema"] == schema["$id"]
    assert problems(entry, schema) == []


@pytest.mark.parametrize(
    "break_it",
    [
        lambda doc: doc.update(name="mcp-team"),  # a name needs its namespace: io.github.OWNER/NAME
        lambda doc: doc.update(description="x" * 101),  # at most 100 characters
        lambda doc: doc["repository"].update(url="not a url"),  # formats are checked (jsonschema's extras)
        lambda doc: doc["packages"][0].update(version="latest"),
        lambda doc: doc["packages"][1].update(fileSha256="not-a-hash"),
        lambda doc: doc["packages"][0].pop("transport"),
    ],
    ids=["name", "description", "repository-url", "latest", "sha256", "transport"],
)
def test_the_check_fails_a_broken_entry(entry: dict[str, Any], schema: dict[str, Any], break_it: Any) -> None:
    broken = copy.deepcopy(entry)
    break_it(broken)
    assert problems(broken, schema) != []


def test_every_version_is_the_packages_exact_version(entry: dict[str, Any]) -> None:
    versions = [entry["version"]] + [package["version"] for package in entry["packages"]]
    assert versions == [mcp_team.__version__] * len(versions)
    assert not any(VERSION_RANGE.search(v) for v in versions)


def test_the_packages_are_the_pypi_project_and_the_bundle_dist_builds(entry: dict[str, Any]) -> None:
    pypi, bundle = entry["packages"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (pypi["registryType"], pypi["identifier"], pypi["runtimeHint"]) == ("pypi", project["name"], "uvx")
    assert [arg["value"] for arg in pypi["packageArguments"]] == ["serve"]
    assert bundle["registryType"] == "mcpb" and bundle["fileSha256"] == BUNDLE_SHA256
    # A GitHub or GitLab release asset whose URL contains "mcp"; its file is the one packaging/dist.py names.
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/releases/download/[^/]+/[^/]+", bundle["identifier"])
    assert bundle["identifier"].endswith(f"/mcp-team-{mcp_team.__version__}.mcpb") and "mcp" in bundle["identifier"]
    assert not re.search(r"\{\w+\}", json.dumps(entry)), "a placeholder was left unfilled"


def test_the_registry_and_the_bundle_offer_the_same_settings(entry: dict[str, Any]) -> None:
    manifest = load_dist().manifest(mcp_team.__version__)
    bundle_env = manifest["server"]["mcp_config"]["env"]
    registry_env = {variable["name"]: variable for variable in entry["packages"][0]["environmentVariables"]}
    assert set(registry_env) == set(bundle_env)
    secrets = {name for name, variable in registry_env.items() if variable.get("isSecret")}
    fields = {name: manifest["user_config"][value.removeprefix("${user_config.").rstrip("}")]
              for name, value in bundle_env.items()}  # fmt: skip
    sensitive = {name for name, field in fields.items() if field.get("sensitive")}
    assert secrets == sensitive == {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}


def test_the_readme_names_the_server_for_the_registrys_ownership_check(entry: dict[str, Any]) -> None:
    """The registry finds `mcp-name: NAME` in the PyPI description (the README), followed by a boundary."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"mcp-name:\s*{re.escape(entry['name'])}(?=\s|$|<|-->)", readme)
