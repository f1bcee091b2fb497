"""Mistakes in an eval suite a user makes by hand: each is an error naming the case and the key, before
anything runs, never a value quietly read as something else."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]

CASE = """\
[[cases]]
name = "bees"
request = "Research bees and write a haiku"
"""


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('expect.max_handoffs = "3"', "cases[0] (bees).expect.max_handoffs: Input should be a valid integer"),
        ('expect.only = "no"', "cases[0] (bees).expect.only: Input should be a valid boolean"),  # lax: false
        ('expect.max_cost_usd = "0.05"', "cases[0] (bees).expect.max_cost_usd: Input should be a valid number"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(tmp_path: Path, line: str, message: str) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE + line + "\n")

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 2 and proc.stdout == ""  # nothing ran
    assert f"{suite}: invalid suite:" in proc.stderr and message in proc.stderr


def test_a_blank_request_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE.replace("Research bees and write a haiku", "  "))

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 2 and proc.stdout == ""
    assert "cases[0] (bees).request: the request is blank" in proc.stderr


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('expect.order = ["researcher", "writer", "researcher"]', "order names researcher more than once"),
        ('expect.order = ["researcher"]\nexpect.not_called = ["researcher"]', "researcher cannot be both in order"),
        (
            'expect.called = ["researcher", "writer"]\nexpect.max_handoffs = 1',
            "max_handoffs = 1 is fewer than the 2 specialists",
        ),
        ('expect.status = "any"', 'checks nothing: with status = "any" it needs another expectation'),
    ],
)
def test_expectations_no_run_can_meet_or_fail_are_refused(tmp_path: Path, lines: str, message: str) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(CASE + lines + "\n")

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 2 and proc.stdout == "", proc.stdout  # not a case that always fails (or passes)
    assert f"cases[0] (bees).expect: {message}" in proc.stderr


def test_case_names_that_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"  # their recordings would be one file on a case-insensitive file system
    suite.write_text(CASE + CASE.replace('name = "bees"', 'name = "Bees"'))

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 2 and proc.stdout == ""
    assert "case names must be unique (ignoring case); used more than once: Bees, bees" in proc.stderr


def test_a_suite_saved_by_a_windows_editor_is_read(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_bytes(b"\xef\xbb\xbf" + CASE.encode())  # UTF-8 with a byte order mark, as Notepad saves it

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 0, proc.stderr
    assert "1/1 cases pass" in proc.stdout


def test_a_suite_that_is_not_utf8_is_a_usage_error_saying_so(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_bytes(CASE.replace("bees", "caf\xe9").encode("latin-1"))

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 2 and proc.stdout == ""  # not 1, which says cases failed
    assert f"{suite}: not UTF-8 text (byte 0xe9 at offset " in proc.stderr and "save it as UTF-8" in proc.stderr
    assert "unexpected" not in proc.stderr


def test_expected_text_with_brackets_is_shown_as_written(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"  # the offline answer has "[offline researcher]" in it
    suite.write_text(CASE + "expect.contains = ['[offline researcher]']\nexpect.matches = ['\\[offline [a-z]+\\]']\n")

    proc = cli_here("eval", str(suite), "--model", "offline", "--quiet")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    [row] = [line for line in proc.stdout.splitlines() if line.startswith("│ bees ")]
    assert "has '[offline researcher]'; matches /\\[offline [a-z]+\\]/" in row  # not eaten as console markup
