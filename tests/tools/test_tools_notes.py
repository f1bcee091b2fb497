"""`write_note` / `read_notes`: notes outlive a run, newest first, query filter, concurrent writes, bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from mcp_team.specialists import Tool, ToolFailed
from mcp_team.specialists.notes import notes_tools

pytestmark = pytest.mark.anyio


def tools(path: Path, **limits: int) -> dict[str, Tool]:
    return {t.name: t for t in notes_tools(path, **limits)}


async def write(notes: dict[str, Tool], title: str, text: str) -> str:
    return await notes["write_note"].run({"title": title, "text": text})


def lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_notes_survive_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "team" / "memory" / "notes.jsonl"  # parents are created on the first write
    first_run = tools(path)
    assert await first_run["read_notes"].run({}) == "No notes yet."

    saved = await write(first_run, "Pricing", "The API costs $3 per million tokens.")
    await write(first_run, "Deadline", "Ship   by Friday.")

    assert saved.startswith("Saved note 'Pricing' (")
    second_run = tools(path)
    out = await second_run["read_notes"].run({})
    assert out.startswith("2 of 2 notes, newest first:\n\n## ")
    assert out.index(": Deadline\nShip   by Friday.") < out.index(": Pricing\nThe API costs $3 per million tokens.")
    stored = lines(path)
    assert [n["title"] for n in stored] == ["Pricing", "Deadline"]
    assert all(n["time"].endswith("+00:00") for n in stored)


async def test_query_is_a_case_insensitive_substring(tmp_path: Path) -> None:
    notes = tools(tmp_path / "notes.jsonl")
    await write(notes, "Vendor A", "Cheap but SLOW support.")
    await write(notes, "Vendor B", "Fast support, pricey.")
    await write(notes, "Slowness report", "Latency doubled in March.")

    out = await notes["read_notes"].run({"query": "slow"})
    assert out.startswith("2 of 2 notes matching 'slow', newest first:")
    assert "Slowness report" in out and "Vendor A" in out and "Vendor B" not in out
    assert "1 of 2 notes matching 'slow'" in await notes["read_notes"].run({"query": "slow", "limit": 1})
    assert await notes["read_notes"].run({"query": "nothing"}) == "No notes match 'nothing' (3 notes in total)."


async def test_limit_returns_the_newest(tmp_path: Path) -> None:
    notes = tools(tmp_path / "notes.jsonl")
    for i in range(5):
        await write(notes, f"note {i}", f"text {i}")

    out = await notes["read_notes"].run({"limit": 2})

    assert out.startswith("2 of 5 notes, newest first:")
    assert "note 4" in out and "note 3" in out and "note 2" not in out


async def test_concurrent_writes_are_all_kept_as_valid_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    writers = [tools(path), tools(path)]  # two tool instances of one file share a lock

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(write, writers[i % 2], f"note {i}", f"body {i} " + "x" * 2000)

    stored = lines(path)
    assert sorted(n["title"] for n in stored) == sorted(f"note {i}" for i in range(20))
    assert "20 of 20 notes" in await writers[0]["read_notes"].run({"limit": 50})


async def test_oversize_and_bad_notes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    notes = tools(path, max_note_chars=100)

    with pytest.raises(ToolFailed) as info:
        await write(notes, "big", "x" * 101)
    assert str(info.value) == (
        "refused: the note is 101 characters; the limit is 100. Shorten it or split it into several notes."
    )
    with pytest.raises(ToolFailed, match="the title is 201 characters; the limit is 200"):
        await write(notes, "t" * 201, "x")
    with pytest.raises(ToolFailed, match="'title' must be a non-empty string"):
        await notes["write_note"].run({"text": "x"})
    with pytest.raises(ToolFailed, match="'text' must be a non-empty string"):
        await write(notes, "t", "   ")
    with pytest.raises(ToolFailed, match="'limit' must be an integer from 1 to 50"):
        await notes["read_notes"].run({"limit": 0})
    with pytest.raises(ToolFailed, match="'query' must be a string"):
        await notes["read_notes"].run({"query": 3})
    assert not path.exists()  # nothing was written


async def test_corrupt_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    notes = tools(path)
    await write(notes, "good one", "kept")
    with path.open("ab") as handle:
        handle.write(b'{"time": "x", "title": "no text"}\nnot json at all\n\xff\xfe\n[1, 2]\n{"torn": ')
    await write(notes, "good two", "kept too")  # starts on a new line despite the torn last line

    out = await notes["read_notes"].run({})

    assert out.startswith("2 of 2 notes, newest first:")
    assert "good one" in out and "good two" in out
    assert out.endswith("(skipped 5 unreadable lines of the notes file: 2, 3, 4, 5, 6)")


async def test_a_repeated_write_saves_the_note_once(tmp_path: Path) -> None:
    """A durable run's tool step re-run after a crash repeats the call: the note is not saved twice."""
    path = tmp_path / "notes.jsonl"
    notes = tools(path)
    first = await write(notes, "Pricing", "The API costs $3.")
    again = await write(tools(path), "Pricing", "The API costs $3.")
    await write(notes, "Pricing", "The API costs $4.")  # another text is another note
    assert again == first
    assert [n["text"] for n in lines(path)] == ["The API costs $3.", "The API costs $4."]
