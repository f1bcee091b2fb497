"""`write_note` and `read_notes`: the memory a specialist keeps across runs, one JSON-lines file per team.

This module owns the notes file format: one JSON object per line, `{"time", "title", "text"}`, appended in
order, so the newest note is the last line. The file and its parent directories are created on the first
write. Writes in one process are serialized by an `anyio.Lock` shared by every tool instance of the same file,
and each note is one `write` of one line in append mode, so concurrent calls never interleave. A line that
cannot be parsed (a crash mid-write, a manual edit) is skipped and reported, never fatal. File I/O runs in a
worker thread.
"""

from __future__ import annotations

import json
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from mcp_team.specialists.tools import Tool, ToolFailed

MAX_TITLE = 200
MAX_QUERY = 200
_LOCKS: weakref.WeakValueDictionary[Path, anyio.Lock] = weakref.WeakValueDictionary()


def notes_tools(path: Path, *, max_note_chars: int = 4000, default_limit: int = 10, max_limit: int = 50) -> list[Tool]:
    """`write_note` and `read_notes` over the JSON-lines notes file at `path`."""
    if max_note_chars < 1 or not 1 <= default_limit <= max_limit:
        raise ValueError("need max_note_chars >= 1 and 1 <= default_limit <= max_limit")
    notes = _Notes(Path(path).expanduser().absolute(), max_note_chars, default_limit, max_limit)
    return [
        Tool(
            name="write_note",
            description=(
                "Save a note for later runs of this team (facts learned, decisions, open questions). "
                f"Notes are kept across runs; at most {max_note_chars} characters of text each."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": f"Short title, at most {MAX_TITLE} characters."},
                    "text": {"type": "string", "description": f"The note, at most {max_note_chars} characters."},
                },
                "required": ["title", "text"],
            },
            run=notes.write,
            destructive=False,  # it adds a note, never changes or removes one
        ),
        Tool(
            name="read_notes",
            description="Read the team's saved notes, newest first, optionally only those containing a word.",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Case-insensitive text to look for in title or text."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": max_limit,
                        "description": f"How many notes to return (default {default_limit}).",
                    },
                },
            },
            run=notes.read,
            read_only=True,
        ),
    ]


class _Notes:
    def __init__(self, path: Path, max_note_chars: int, default_limit: int, max_limit: int) -> None:
        self.path = path
        self.max_note_chars = max_note_chars
        self.default_limit = default_limit
        self.max_limit = max_limit
        lock = _LOCKS.get(path)
        if lock is None:
            lock = _LOCKS[path] = anyio.Lock()
        self.lock = lock  # held here, so the shared entry lives as long as any tool of this file

    async def write(self, args: dict[str, Any]) -> str:
        title, text = args.get("title"), args.get("text")
        if not isinstance(title, str) or not title.strip():
            raise ToolFailed("'title' must be a non-empty string")
        if not isinstance(text, str) or not text.strip():
            raise ToolFailed("'text' must be a non-empty string")
        title = " ".join(title.split())
        if len(title) > MAX_TITLE:
            raise ToolFailed(f"refused: the title is {len(title)} characters; the limit is {MAX_TITLE}")
        if len(text) > self.max_note_chars:
            raise ToolFailed(
                f"refused: the note is {len(text)} characters; the limit is {self.max_note_chars}. "
                "Shorten it or split it into several notes."
            )
        note = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "title": title, "text": text}
        line = json.dumps(note, ensure_ascii=False) + "\n"
        async with self.lock:
            try:
                saved = await anyio.to_thread.run_sync(self._append, line, title, text)
            except OSError as exc:
                raise ToolFailed(f"could not save the note: {exc.strerror or exc}") from None
        if saved is not None:
            return f"Saved note '{title}' ({saved})."
        return f"Saved note '{title}' ({note['time']})."

    def _append(self, line: str, title: str, text: str) -> str | None:
        """Append `line`, unless a note with this title and text is already saved: then its time. A call
        repeated (a durable run's step re-run after a crash) never saves a note twice."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = line.encode("utf-8")
        with self.path.open("a+b") as handle:  # writes always go to the end, whatever the read position
            handle.seek(0)
            same = [n for n in _parse(handle.read())[0] if n["title"] == title and n["text"] == text]
            if same:
                return same[-1]["time"]
            if handle.seek(0, 2) > 0:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":  # a torn last line must not swallow this note
                    data = b"\n" + data
            handle.write(data)
        return None

    async def read(self, args: dict[str, Any]) -> str:
        query = args.get("query")
        if query is not None and not isinstance(query, str):
            raise ToolFailed("'query' must be a string")
        if query is not None and len(query) > MAX_QUERY:
            raise ToolFailed(f"refused: the query is {len(query)} characters; the limit is {MAX_QUERY}")
        limit = args.get("limit", self.default_limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= self.max_limit:
            raise ToolFailed(f"'limit' must be an integer from 1 to {self.max_limit}")
        try:
            data = await anyio.to_thread.run_sync(self._load)
        except OSError as exc:
            raise ToolFailed(f"could not read the notes: {exc.strerror or exc}") from None
        if data is None:
            return "No notes yet."
        notes, bad_lines = _parse(data)
        needle = (query or "").strip().casefold()
        matching = [n for n in reversed(notes) if needle in f"{n['title']}\n{n['text']}".casefold()]
        if not notes:
            out = ["No notes yet."]
        elif not matching:
            out = [f"No notes match '{query}' ({len(notes)} notes in total)."]
        else:
            shown = matching[:limit]
            about = f" matching '{query}'" if needle else ""
            out = [f"{len(shown)} of {len(matching)} notes{about}, newest first:"]
            out.extend(f"\n## {n['time']}: {n['title']}\n{n['text']}" for n in shown)
        if bad_lines:
            numbers = ", ".join(str(i) for i in bad_lines[:10]) + (", ..." if len(bad_lines) > 10 else "")
            out.append(
                f"\n(skipped {len(bad_lines)} unreadable line{'s' if len(bad_lines) > 1 else ''} "
                f"of the notes file: {numbers})"
            )
        return "\n".join(out)

    def _load(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None


def _parse(data: bytes) -> tuple[list[dict[str, str]], list[int]]:
    """The notes in file order, and the (1-based) numbers of lines that are not valid notes."""
    notes: list[dict[str, str]] = []
    bad: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            note = json.loads(raw)
        except ValueError:  # also UnicodeDecodeError
            bad.append(number)
            continue
        if isinstance(note, dict) and all(isinstance(note.get(k), str) for k in ("time", "title", "text")):
            notes.append({k: note[k] for k in ("time", "title", "text")})
        else:
            bad.append(number)
    return notes, bad
