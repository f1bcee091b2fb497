"""The MCP Bundle `make dist` builds (`mcp-team-<version>.mcpb`, server type `uv`): `mcpb validate` accepts its
manifest, and unpacked into a folder of its own it starts the way a host starts it (the manifest's
`mcp_config`, its `${...}` filled in by the mcpb library's own function) and runs a team; the manifest
declares the tools and prompts the server has, and its user_config reaches the server: a base URL alone runs
the team on a local OpenAI-compatible server.

The build runs once per test session (shared with test_install_wheel.py); uv installs the bundle's locked
dependencies from the package index at its first start, as on a user's machine.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any, TextIO, cast

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import mcp_team
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI
from support.install_support import (
    MCPB,
    MCPB_CONFIG,
    MCPB_PACKAGE,
    REQUEST,
    built_dist,
    check_install,
    host_env,
    host_path,
    uv_bin,
    uv_cache,
)

pytestmark = [
    pytest.mark.process,
    pytest.mark.anyio,
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return built_dist(tmp_path_factory)


@pytest.fixture
def unpacked(dist: dict[str, Path], tmp_path: Path) -> Path:
    """The bundle unpacked with `mcpb unpack` into a fresh folder, as a host installs it."""
    folder = tmp_path / "extension"
    done = subprocess.run([str(MCPB), "unpack", str(dist["bundle"]), str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def host_config(bundle: Path, home: Path, **user_config: str) -> dict[str, Any]:
    """The command, args and env a host starts for the bundle, with `user_config` given by the user."""
    done = subprocess.run(
        ["node", str(MCPB_CONFIG), str(MCPB_PACKAGE), str(bundle), str(home)]
        + [f"{key}={value}" for key, value in user_config.items()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def server_params(config: dict[str, Any], home: Path, cache: Path) -> StdioServerParameters:
    """`config` as a host starts it: its env over the host's few variables; uv (only) on PATH."""
    env = {**host_env(home, host_path(uv_bin(home / "bin")), cache), **config["env"]}
    return StdioServerParameters(command=config["command"], args=config["args"], env=env)


def test_mcpb_validates_the_manifest_and_its_version_is_the_packages(unpacked: Path) -> None:
    done = subprocess.run([str(MCPB), "validate", str(unpacked / "manifest.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((unpacked / "manifest.json").read_text())
    assert manifest["version"] == mcp_team.__version__
    assert manifest["server"]["type"] == "uv"


def test_the_bundle_holds_the_project_and_its_lock_and_no_environment(dist: dict[str, Path]) -> None:
    bundle = set(zipfile.ZipFile(dist["bundle"]).namelist())
    wheel = set(zipfile.ZipFile(dist["wheel"]).namelist())
    package = {name for name in wheel if name.startswith("mcp_team/")}
    assert package and {f"src/{name}" for name in package} <= bundle, "the bundle lacks a file of the wheel"
    assert {"manifest.json", "pyproject.toml", "README.md", "uv.lock"} <= bundle
    assert [name for name in bundle if ".venv/" in name or "__pycache__" in name or name.endswith(".pyc")] == []


def test_user_config_fields_that_are_optional_have_defaults_and_keys_are_sensitive(unpacked: Path) -> None:
    """An optional field without a default stays a literal `${user_config.KEY}` in the server's env, which the
    server then refuses (a base URL that is no URL): the host fills in only what it has a value for."""
    manifest = json.loads((unpacked / "manifest.json").read_text())
    fields = manifest["user_config"]
    assert {name for name, field in fields.items() if field.get("sensitive")} == {"anthropic_api_key", "openai_api_key"}
    assert [name for name, field in fields.items() if not field.get("required") and "default" not in field] == []
    env = manifest["server"]["mcp_config"]["env"]
    assert set(env.values()) == {f"${{user_config.{name}}}" for name in fields}, "every field reaches the server"


async def test_the_unpacked_bundle_runs_a_team_as_its_manifest_says(
    unpacked: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = host_config(unpacked, home, model="offline")
    assert config["command"] == "uv" and config["args"][-1] == "serve", config
    assert config["env"] == {"MCP_TEAM_MODEL": "offline", "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "",
                             "OPENAI_BASE_URL": ""}  # fmt: skip
    params = server_params(config, home, uv_cache(tmp_path_factory))
    prefix = [params.command, *params.args[:-1]]  # `uv run --frozen --directory <bundle> mcp-team`
    await check_install(prefix, params, home)

    # Without a team file, the server has the tools and prompts the manifest declares, described alike.
    manifest = json.loads((unpacked / "manifest.json").read_text())
    with (home / "server2.err").open("w") as errlog:
        async with Client(stdio_client(params, errlog=cast(TextIO, errlog))) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
    assert [tool["name"] for tool in manifest["tools"]] == list(tools)
    for declared in manifest["tools"]:
        served = " ".join((tools[declared["name"]].description or "").split())  # one line, as declared
        assert served.startswith(declared["description"]), declared["name"]
    assert [prompt["name"] for prompt in manifest["prompts"]] == list(prompts)
    for declared in manifest["prompts"]:
        prompt = prompts[declared["name"]]
        assert declared["description"] == prompt.description
        assert declared["arguments"] == [argument.name for argument in prompt.arguments or []]
        assert all(f"${{arguments.{name}}}" in declared["text"] for name in declared["arguments"])


async def test_a_base_url_alone_runs_the_bundle_on_a_local_openai_compatible_server(
    unpacked: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What a user of a local server (Ollama, vLLM, LM Studio) fills in: its URL, no key, no model."""
    with FakeOpenAIAPI(brain=offline_brain) as api:
        config = host_config(unpacked, tmp_path, openai_base_url=api.base_url)
        params = server_params(config, tmp_path, uv_cache(tmp_path_factory))
        with (tmp_path / "server.err").open("w") as errlog:
            async with Client(stdio_client(params, errlog=cast(TextIO, errlog))) as client:
                result = await client.call_tool("run_team", {"request": REQUEST})
        assert not result.is_error and result.structured_content is not None, result.content
        assert result.structured_content["status"] == "complete"
        assert api.requests, "the run called no model on the local server"
        assert {body["model"] for body in api.requests} <= {"gpt-4o", "gpt-4o-mini"}  # the openai defaults
