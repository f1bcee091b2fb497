"""`read_file` / `list_files`: confined to the granted roots (`..`, absolute paths, symlinks), text only, limits,
and a long file read whole in parts."""

from __future__ import annotations

import os
import re
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
        "ééé\n\n[part: bytes 0-6 of 200 of long.txt; call read_file again with offset=6 for the rest]"  # no half é
    )
    assert (await read(tree, "long.txt", max_bytes=10)).startswith("ééééé\n\n[part: bytes 0-10 of 200 ")
    assert await read(tree, "long.txt", max_bytes=10**9) == "é" * 100  # capped at the configured limit
    with pytest.raises(ToolFailed, match="'max_bytes' must be a positive integer"):
        await read(tree, "long.txt", max_bytes=0)


BEES = "🐝 bees dance é\n"  # 4-, 1- and 2-byte characters: parts end inside characters unless cut before them
NOTE = re.compile(r"\n\n\[part: bytes (\d+)-(\d+) of (\d+) of [^\n]*\]\Z")


async def read_in_parts(tool: Tool, path: str, **args: object) -> list[str]:
    """Every result of reading `path` from its start, going where each part's note says, until a note says
    the end of the file."""
    results = [await tool.run({"path": path, **args})]
    while "; call read_file again with offset=" in results[-1]:
        offset = int(results[-1].rsplit("offset=", 1)[1].split()[0])
        results.append(await tool.run({"path": path, "offset": offset, **args}))
        assert len(results) < 1000, "the notes lead in a circle"
    assert results[-1].endswith(": the end of the file]")
    return results


async def test_a_long_file_is_read_whole_in_parts_each_fitting_what_the_model_sees(tree: Path) -> None:
    content = BEES * 300  # 4,500 characters, 5,700 bytes
    (tree / "bees.txt").write_text(content, encoding="utf-8")
    read_file = tools(tree, max_result_chars=1000)["read_file"]

    results = await read_in_parts(read_file, "bees.txt")

    texts = [NOTE.split(result)[0] for result in results]
    assert "".join(texts) == content  # all of it, each character once
    assert all(len(result) <= 1000 for result in results)  # the loop never cuts one, nor its note
    ranges = [tuple(int(n) for n in NOTE.search(result).groups()) for result in results]  # type: ignore[union-attr]
    assert [start for start, _, _ in ranges] == [0, *(end for _, end, _ in ranges[:-1])]
    assert ranges[-1][1:] == (5700, 5700)
    assert read_file.description.endswith(
        "Up to 1000 bytes at a time: a longer file comes in parts, each ending "
        "with a note that gives the offset of the next."
    )
    assert read_file.input_schema["properties"]["max_bytes"]["maximum"] == 1000
    assert read_file.max_result_chars == 1000

    smaller = await read_in_parts(read_file, "bees.txt", max_bytes=77)  # the model asks for less at a time
    assert "".join(NOTE.split(result)[0] for result in smaller) == content


async def test_offsets_no_note_gave(tree: Path) -> None:
    (tree / "bees.txt").write_text(BEES * 2, encoding="utf-8")  # 38 bytes: the second bee is at 19

    assert (
        await read(tree, "bees.txt", offset=19)
        == BEES + "\n\n[part: bytes 19-38 of 38 of bees.txt: the end of the file]"
    )
    inside = await read(tree, "bees.txt", offset=20)  # inside the bee: the next whole character
    assert inside == BEES[1:] + "\n\n[part: bytes 23-38 of 38 of bees.txt: the end of the file]"
    with pytest.raises(ToolFailed) as info:
        await read(tree, "bees.txt", offset=38)
    assert str(info.value) == "offset=38 is past the end of bees.txt (38 bytes): there is no more to read"
    with pytest.raises(
        ToolFailed, match="the character at offset 0 is longer than 2 bytes; call again with max_bytes=4"
    ):
        await read(tree, "bees.txt", max_bytes=2)
    for wrong in (-1, "3", True):
        with pytest.raises(ToolFailed, match="'offset' must be an integer of at least 0"):
            await read(tree, "bees.txt", offset=wrong)
    (tree / "late.txt").write_bytes(b"a" * 30 + "café".encode("latin-1"))
    with pytest.raises(ToolFailed, match=r"not UTF-8 text \(invalid byte at offset 33\)"):
        await read(tree, "late.txt", offset=20)


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
