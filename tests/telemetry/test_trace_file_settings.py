"""`mcp-team trace` on files an operator may have at hand that are not trace files: each is one line naming the
file and what is wrong. A binary file was said as "'utf-8' codec can't decode byte 0xff ..." with no file name,
and an empty one as JSON's "Expecting value: line 1 column 1"."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\xff\xfe\x00binary", "not a trace file (not UTF-8 text: trace files are OTLP JSON)"),
        (b"", "empty, not a trace"),
        (b"  \n", "empty, not a trace"),
    ],
)
def test_a_file_that_is_no_trace_is_named_in_one_line(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content)
    done = cli_here("trace", str(path))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mcp-team: error: {path}: {said}"), done.stderr
