"""`read_file` and `list_files`: read-only access to the directories a team file grants, and nothing else.

This module owns the confinement rule: a path (relative to a root, or absolute) is resolved with
`Path.resolve()`, which follows every symlink and `..`, and is refused unless the result lies inside one of the
resolved roots. So `../` escapes, absolute paths elsewhere and symlinks pointing out are all refused, while a
symlink between two places inside the roots works. Only regular UTF-8 text files are read (no binaries, FIFOs
or devices), a part at a time: a part fits what the model sees of a result (`max_result_chars`) with its note,
which gives the byte offset of the next part, so a long file is read whole in parts and never cut by the loop.
Listings are one directory level, sorted, capped. All file system work runs in a worker thread so the event
loop never blocks.

Limitation: the check and the open are two steps, so a process that can write inside a root could swap a
checked file for a symlink in between. The roots are meant to hold content the team reads, not content an
adversary writes to concurrently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from mcp_team.specialists.tools import MAX_RESULT_CHARS, Tool, ToolFailed

MAX_PATH = 1024
_UTF8_TAIL = 3  # a cut can split a UTF-8 character of up to 4 bytes
_CONTINUATION = bytes(range(0x80, 0xC0))  # the bytes after the first of a UTF-8 character


@dataclass(frozen=True)
class _Located:
    path: Path  # resolved
    root: Path  # the resolved root that contains it


def file_tools(
    roots: Sequence[Path],
    *,
    max_bytes: int = 200_000,
    max_entries: int = 500,
    max_result_chars: int = MAX_RESULT_CHARS,
) -> list[Tool]:
    """`read_file` and `list_files`, confined to `roots` (resolved now; they need not exist yet).

    `read_file` reads a part of at most `max_bytes` bytes, and no more than fits in `max_result_chars` characters
    with its note: what a model sees of the tools is never cut."""
    if not roots:
        raise ValueError("file tools need at least one root directory")
    if max_bytes < 1 or max_entries < 1 or max_result_chars < 1:
        raise ValueError("max_bytes, max_entries and max_result_chars must be at least 1")
    part = min(max_bytes, max_result_chars)  # a byte decodes to at most one character
    roots = tuple(dict.fromkeys(Path(r).expanduser().resolve() for r in roots))
    files = _Files(roots, part, max_entries, max_result_chars)
    where = ", ".join(str(r) for r in files.roots)
    return [
        Tool(
            name="read_file",
            description=(
                f"Read a UTF-8 text file from the allowed directories ({where}). Paths are relative to a "
                f"directory (as list_files shows them) or absolute inside one. Up to {part} bytes at a time: "
                "a longer file comes in parts, each ending with a note that gives the offset of the next."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "e.g. notes/plan.md"},
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "description": "The byte to start at, as the note after the previous part says (default 0).",
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": part,
                        "description": f"Read at most this many bytes (default and limit {part}).",
                    },
                },
                "required": ["path"],
            },
            run=files.read_file,
            read_only=True,
            max_result_chars=max_result_chars,
        ),
        Tool(
            name="list_files",
            description=(
                f"List the files and directories (directories end in /) of one directory in the allowed "
                f"directories ({where}). Without a path, lists the top of each allowed directory."
            ),
            input_schema={
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A directory; omit for the top level."}},
            },
            run=files.list_files,
            read_only=True,
            max_result_chars=max_result_chars,
        ),
    ]


class _Files:
    def __init__(self, roots: tuple[Path, ...], max_bytes: int, max_entries: int, max_result_chars: int) -> None:
        self.roots = roots
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.max_result_chars = max_result_chars

    # --- tools ---------------------------------------------------------------------------------------------------

    async def read_file(self, args: dict[str, Any]) -> str:
        raw = _path_argument(args)
        if raw is None:
            raise ToolFailed('\'path\' is required, e.g. {"path": "README.md"}')
        limit = args.get("max_bytes", self.max_bytes)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolFailed(f"'max_bytes' must be a positive integer (at most {self.max_bytes})")
        offset = args.get("offset", 0)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ToolFailed("'offset' must be an integer of at least 0, as the note after the previous part says")
        return await anyio.to_thread.run_sync(self._read, raw, offset, min(limit, self.max_bytes))

    async def list_files(self, args: dict[str, Any]) -> str:
        raw = _path_argument(args)
        if raw in ("", ".", "/"):
            raw = None  # the top level
        return await anyio.to_thread.run_sync(self._list, raw)

    # --- blocking work, in a worker thread ---------------------------------------------------------------------

    def _read(self, raw: str, offset: int, limit: int) -> str:
        located = self._locate(raw)
        try:
            info = located.path.stat()
            if stat.S_ISDIR(info.st_mode):
                raise ToolFailed(f"{raw} is a directory; use list_files to see what it holds")
            if not stat.S_ISREG(info.st_mode):  # a FIFO or device could block or never end
                raise ToolFailed(f"refused: {raw} is not a regular file")
            if offset and offset >= info.st_size:
                raise ToolFailed(
                    f"offset={offset} is past the end of {raw} ({info.st_size} bytes): there is no more to read"
                )
            # Room for the note, with the longest numbers it can hold, so that the loop never cuts it off.
            most = max(info.st_size, offset + limit)
            limit = max(1, min(limit, self.max_result_chars - len(_part_note(raw, most, most, most, more=True))))
            with located.path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read(_UTF8_TAIL + limit + 1)
        except OSError as exc:
            raise ToolFailed(f"cannot read {raw}: {exc.strerror or exc}") from None
        # An offset inside a character (not one a note gave) starts at the next whole one.
        skip = len(data[:_UTF8_TAIL]) - len(data[:_UTF8_TAIL].lstrip(_CONTINUATION)) if offset else 0
        start = offset + skip
        data = data[skip : skip + limit + 1]
        more = len(data) > limit
        data = data[:limit]
        if b"\x00" in data:
            raise ToolFailed(f"refused: {raw} is a binary file; read_file reads only UTF-8 text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not (more and exc.start >= len(data) - _UTF8_TAIL):
                raise ToolFailed(
                    f"refused: {raw} is not UTF-8 text (invalid byte at offset {start + exc.start}); "
                    "read_file reads only UTF-8 text"
                ) from None
            if exc.start == 0:  # the part would be empty, and its note would give the same offset again
                raise ToolFailed(
                    f"the character at offset {start} is longer than {limit} bytes; call again with max_bytes=4 or more"
                ) from None
            data = data[: exc.start]
            text = data.decode("utf-8")
        if not more and start == 0:
            return text
        end = start + len(data)
        return text + _part_note(raw, start, end, max(info.st_size, end), more=more)

    def _list(self, raw: str | None) -> str:
        if raw is None:
            if len(self.roots) == 1:
                return self._list_dir(_Located(self.roots[0], self.roots[0]))
            return "\n\n".join(f"In {root}:\n{self._list_dir(_Located(root, root))}" for root in self.roots)
        return self._list_dir(self._locate(raw), raw)

    def _list_dir(self, located: _Located, raw: str | None = None) -> str:
        shown = raw if raw is not None else str(located.path)
        try:
            children = list(os.scandir(located.path))
        except FileNotFoundError:
            raise ToolFailed(f"{shown} does not exist") from None
        except NotADirectoryError:
            raise ToolFailed(f"{shown} is a file, not a directory; use read_file to read it") from None
        except OSError as exc:
            raise ToolFailed(f"cannot list {shown}: {exc.strerror or exc}") from None
        entries: list[str] = []
        outside = 0
        for child in children:
            target = Path(child.path).resolve()
            if self._root_of(target) is None:
                outside += 1
                continue
            relative = Path(child.path).relative_to(located.root).as_posix()
            entries.append(relative + "/" if target.is_dir() else relative)
        entries.sort()
        lines = entries[: self.max_entries] or ["(empty directory)"]
        if len(entries) > self.max_entries:
            lines.append(f"... and {len(entries) - self.max_entries} more entries not shown")
        if outside:
            lines.append(f"({outside} symlinks pointing outside the allowed directories are not shown)")
        return "\n".join(lines)

    def _locate(self, raw: str) -> _Located:
        """Resolve `raw` inside a root, or refuse. A relative path is tried against each root in turn."""
        path = Path(raw)
        candidates = [path] if path.is_absolute() else [root / path for root in self.roots]
        inside: list[_Located] = []
        for candidate in candidates:
            try:
                resolved = candidate.resolve()
            except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, NUL bytes
                raise ToolFailed(f"refused: {raw} is not a usable path: {exc}") from None
            root = self._root_of(resolved)
            if root is not None:
                located = _Located(resolved, root)
                if resolved.exists():
                    return located
                inside.append(located)
        if not inside:
            where = ", ".join(str(r) for r in self.roots)
            raise ToolFailed(f"refused: {raw} is outside the allowed directories: {where}")
        raise ToolFailed(f"{raw} does not exist (use list_files to see what is there)")

    def _root_of(self, resolved: Path) -> Path | None:
        return next((root for root in self.roots if resolved.is_relative_to(root)), None)


def _part_note(raw: str, start: int, end: int, size: int, *, more: bool) -> str:
    """What follows a part of a file: where it lies, and how to read the next one, or that it is the last."""
    where = f"\n\n[part: bytes {start}-{end} of {size} of {raw}"
    if more:
        return f"{where}; call read_file again with offset={end} for the rest]"
    return f"{where}: the end of the file]"


def _path_argument(args: dict[str, Any]) -> str | None:
    raw = args.get("path")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ToolFailed("'path' must be a string")
    if len(raw) > MAX_PATH or "\x00" in raw:
        raise ToolFailed(f"refused: 'path' must be at most {MAX_PATH} characters, without NUL bytes")
    return raw.strip()
