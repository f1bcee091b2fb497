"""Settings are read once, at the edge: nothing below `cli/` and `server/` reads the process environment.

The CLI and the server read the environment (flags, variables, the team file) and pass values down: a
`ModelSettings`, a `TracingConfig`, a team file's path, a mapping for the variables a team file names. A
module below them that read `os.environ` itself would make a library caller's explicit settings lose to a
variable it never set, and a test's result hang on the shell it runs in. This reads the source (code only:
strings and comments may name the variables) and fails on any such read.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "mcp_team"
EDGE = ("cli", "server")

# The ways Python code reads (or changes) the process environment.
READS = re.compile(
    r"\bos\s*\.\s*(environb?|getenvb?|putenv|unsetenv)\b"  # os.environ, os.getenv(...), ...
    r"|\bfrom\s+os\s+import\b[^\n]*\b(environb?|getenvb?)\b"  # from os import environ
    r"|\bimport\s+posix\b|\bposix\s*\.\s*environ\b"
    r"|\benviron\s*\.\s*get\s*\("  # environ.get(...) on a re-imported os.environ
    r"|(?<![\w.])getenv\s*\("  # getenv(...) imported bare
)


def code_lines(source: str) -> dict[int, str]:
    """The code of each line of `source`, without its strings and comments (a docstring may say which variable
    the edge reads), by line number."""
    skipped = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    lines: dict[int, list[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped:
            lines.setdefault(token.start[0], []).append(token.string)
    return {number: " ".join(words) for number, words in lines.items()}


def matching_lines(path: Path, pattern: re.Pattern[str]) -> list[str]:
    """`path:line: text` of each line of `path` whose code matches `pattern`."""
    text = path.read_text(encoding="utf-8")
    source = text.splitlines()
    where = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE) else path
    return [
        f"{where}:{number}: {source[number - 1].strip()}"
        for number, code in code_lines(text).items()
        if pattern.search(code)
    ]


def environment_reads(path: Path) -> list[str]:
    """`path:line: text` of each line of `path` whose code reads the environment."""
    return matching_lines(path, READS)


def below_the_edge() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in EDGE or p.parent == PACKAGE
    )


def test_nothing_below_cli_and_server_reads_the_environment() -> None:
    files = below_the_edge()
    assert len(files) > 50 and any(p.parts[-2] == "llm" for p in files)  # the walk found the package
    reads = [hit for path in files for hit in environment_reads(path)]
    assert not reads, (
        "read the environment in cli/ or server/ and pass the value down (see llm/settings.py):\n" + "\n".join(reads)
    )


def settings_classes() -> set[str]:
    """The package's pydantic-settings classes: constructing one reads the environment."""
    pattern = re.compile(r"^class (\w+)\(BaseSettings\)", re.M)
    return {name for path in PACKAGE.rglob("*.py") for name in pattern.findall(path.read_text(encoding="utf-8"))}


def test_settings_classes_are_constructed_only_at_the_edge() -> None:
    """`ModelSettings()` reads the environment as it is made (pydantic-settings): below the edge it is given."""
    names = settings_classes()
    assert "ModelSettings" in names and "ServerLimits" in names
    made = re.compile(rf"(?<!class )\b({'|'.join(sorted(names))})\s*\(")
    found = [hit for path in below_the_edge() for hit in matching_lines(path, made)]
    assert not found, "construct settings in cli/ or server/ and pass them down:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "value = os.environ.get('X')",
        "value = os.environ['X']",
        "value = os.getenv('X')",
        "from os import environ",
        "from os import getenv as read",
        "key = environ.get(name)",
        "os.putenv('X', '1')",
        "os . environ",
    ],
)
def test_every_way_of_reading_it_is_caught(tmp_path: Path, line: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        f'"""Reads nothing.\n\nos.environ in a docstring is fine."""\n\n# os.getenv in a comment too\n{line}\n'
    )
    assert environment_reads(probe) == [f"{probe}:6: {line}"]


def test_strings_and_comments_do_not_count(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Reads\n`os.environ` at the edge."""\nx = "os.getenv"  # os.environ.get\nenv.get("X")\n')
    assert environment_reads(probe) == []
