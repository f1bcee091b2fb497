"""`read_file` / `list_files`: confined to the granted roots (`..`, absolute paths, symlinks), text only, limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_team.specialists import Tool, ToolFailed
from mcp_team.specialists.files import file_tools

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/docs (the root) with files, a subdirectory and symlinks; tmp/secret.txt outside it."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "readme.md").write_text("# Docs\nhello ünïcode\n", encoding="utf-8")
    (docs / "sub" / "plan.txt").write_text("the plan", encoding="utf-8")
    (docs / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (docs / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    (docs / "escape").symlink_to(tmp_path / "secret.txt")
    (docs / "escape_dir").symlink_to(tmp_path)
    (docs / "alias.md").symlink_to(docs / "sub" / "plan.txt")
    return docs


def tools(*roots: Path, **limits: int) -> dict[str, Tool]:
    return {t.name: t for t in file_tools(list(roots), **limits)}


async def read(root: Path | list[Path], path: str, **args: object) -> str:
    roots = root if isinstance(root, list) else [root]
    return await tools(*roots)["read_file"].run({"path": path, **args})


async def failure(root: Path, name: str, **args: object) -> str:
    with pytest.raises(ToolFailed) as info:
        await tools(root)[name].run(args)
    return str(info.value)


# --- inside the root ----------------------------------------------------------------------------------------------


async def test_read_relative_and_absolute_paths(tree: Path) -> None:
    assert await read(tree, "readme.md") == "# Docs\nhello ünïcode\n"
    assert await read(tree, "sub/plan.txt") == "the plan"
    assert await read(tree, "./sub/../sub/plan.txt") == "the plan"
    assert await read(tree, str(tree / "sub" / "plan.txt")) == "the plan"


async def test_list_shows_sorted_entries_relative_to_the_root(tree: Path) -> None:
    listing = await tools(tree)["list_files"].run({})

    assert listing.splitlines() == [
        "alias.md",
        "image.bin",
        "latin1.txt",
        "readme.md",
        "sub/",
        "(2 symlinks pointing outside the allowed directories are not shown)",
    ]
    assert await tools(tree)["list_files"].run({"path": "sub"}) == "sub/plan.txt"
    assert await tools(tree)["list_files"].run({"path": str(tree / "sub")}) == "sub/plan.txt"


async def test_list_is_capped(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / f"f{i:02}.txt").write_text("x")

    listing = (await tools(tmp_path, max_entries=5)["list_files"].run({})).splitlines()

    assert listing == ["f00.txt", "f01.txt", "f02.txt", "f03.txt", "f04.txt", "... and 7 more entries not shown"]


async def test_read_is_cut_at_the_limit(tree: Path) -> None:
    (tree / "long.txt").write_text("é" * 100, encoding="utf-8")  # 200 bytes

    assert await tools(tree, max_bytes=7)["read_file"].run({"path": "long.txt"}) == (
        "ééé\n\n[truncated: long.txt is 200 bytes; only the first 7 were read]"  # no half character
    )
    assert (await read(tree, "long.txt", max_bytes=10)).startswith("ééééé\n\n[truncated:")
    assert await read(tree, "long.txt", max_bytes=10**9) == "é" * 100  # capped at the configured limit
    with pytest.raises(ToolFailed, match="'max_bytes' must be a positive integer"):
        await read(tree, "long.txt", max_bytes=0)


# --- refusals -----------------------------------------------------------------------------------------------------


async def test_dotdot_escape_is_refused(tree: Path) -> None:
    message = await failure(tree, "read_file", path="../secret.txt")

    assert message == f"refused: ../secret.txt is outside the allowed directories: {tree}"
    assert "outside the allowed directories" in await failure(tree, "read_file", path="sub/../../secret.txt")
    assert "outside the allowed directories" in await failure(tree, "list_files", path="..")


async def test_absolute_path_outside_is_refused(tree: Path) -> None:
    assert await failure(tree, "read_file", path="/etc/passwd") == (
        f"refused: /etc/passwd is outside the allowed directories: {tree}"
    )
    assert "outside the allowed directories" in await failure(tree, "list_files", path="/etc")


async def test_symlinks_out_are_refused_and_symlinks_within_work(tree: Path) -> None:
    assert await failure(tree, "read_file", path="escape") == (
        f"refused: escape is outside the allowed directories: {tree}"
    )
    assert "outside" in await failure(tree, "read_file", path="escape_dir/secret.txt")
    assert "outside" in await failure(tree, "list_files", path="escape_dir")
    assert await read(tree, "alias.md") == "the plan"


async def test_missing_binary_and_non_text_files(tree: Path) -> None:
    assert await failure(tree, "read_file", path="nope.txt") == (
        "nope.txt does not exist (use list_files to see what is there)"
    )
    assert await failure(tree, "read_file", path="image.bin") == (
        "refused: image.bin is a binary file; read_file reads only UTF-8 text"
    )
    assert await failure(tree, "read_file", path="latin1.txt") == (
        "refused: latin1.txt is not UTF-8 text (invalid byte at offset 3); read_file reads only UTF-8 text"
    )
    assert await failure(tree, "read_file", path="sub") == "sub is a directory; use list_files to see what it holds"
    assert await failure(tree, "list_files", path="readme.md") == (
        "readme.md is a file, not a directory; use read_file to read it"
    )


async def test_fifo_is_not_opened(tree: Path) -> None:
    os.mkfifo(tree / "pipe")

    assert await failure(tree, "read_file", path="pipe") == "refused: pipe is not a regular file"


async def test_bad_arguments(tree: Path) -> None:
    assert "'path' is required" in await failure(tree, "read_file")
    assert await failure(tree, "read_file", path=3) == "'path' must be a string"
    assert "without NUL bytes" in await failure(tree, "read_file", path="a\x00b")


# --- several roots ------------------------------------------------------------------------------------------------


async def test_multiple_roots(tree: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "table.csv").write_text("a,b\n1,2\n")
    (data / "readme.md").write_text("the data readme")
    both = [tree, data]

    assert await read(both, "table.csv") == "a,b\n1,2\n"  # found in the second root
    assert await read(both, "readme.md") == "# Docs\nhello ünïcode\n"  # the first root wins a tie
    assert await read(both, str(data / "readme.md")) == "the data readme"  # absolute paths disambiguate
    listing = await tools(*both)["list_files"].run({})
    assert listing.startswith(f"In {tree}:\nalias.md\n")
    assert f"\n\nIn {data}:\nreadme.md\ntable.csv" in listing
    with pytest.raises(ToolFailed) as info:
        await read(both, "../secret.txt")
    assert str(info.value) == f"refused: ../secret.txt is outside the allowed directories: {tree}, {data}"


def test_roots_are_required() -> None:
    with pytest.raises(ValueError, match="at least one root"):
        file_tools([])
