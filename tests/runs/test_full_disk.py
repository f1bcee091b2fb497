"""A state directory on a disk that is full (a small tmpfs, filled): `mcp-team runs` and `runs show` still read
the runs (SQLite cannot make a WAL reader's shared memory there, so they read the file as last written), and a
run that cannot open the database says the disk is full. Both said only "disk I/O error" (exit 2), and listing
failed, though the README says listing only reads. Needs root (mount), as CI runs; fails saying so where a
mount is refused."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here

pytestmark = [pytest.mark.process]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    place = tmp_path / "disk"
    place.mkdir()
    # Failed, not skipped, where a mount is refused (as the browser tests fail without chromium): a test that
    # skips in CI proves nothing. CI runs as root, which may mount.
    if os.geteuid() != 0:
        pytest.fail("this test mounts a 4 MiB tmpfs as a full disk, which needs root: run the suite as root (as CI)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(place)], capture_output=True)
    if mounted.returncode != 0:
        pytest.fail(f"this test needs to mount a tmpfs as a full disk, refused here: {mounted.stderr.decode().strip()}")
    try:
        yield place
    finally:
        subprocess.run(["umount", "-l", str(place)], check=False)


def _fill(place: Path) -> None:
    fd = os.open(place / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * (1 << 16)):
            pass
    except OSError:
        pass  # no space left: what this is for
    finally:
        os.close(fd)


def test_runs_are_listed_and_a_run_says_the_disk_is_full(small_disk: Path) -> None:
    state = small_disk / "state"
    made = subprocess.run([MCP_TEAM, "run", "--model", "offline", "--state-dir", str(state), "Research bees"],
                          env=clean_env(), capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run_id = made.stderr.split("mcp-team: run ", 1)[1].split()[0]
    _fill(small_disk)

    listed = cli_here("runs", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and "complete" in listed.stdout
    shown = cli_here("runs", "show", run_id, "--state-dir", str(state))
    assert shown.returncode == 0, shown.stderr
    assert f"run {run_id}: complete" in shown.stdout

    refused = cli_here("run", "--model", "offline", "--state-dir", str(state), "Research wasps")
    assert refused.returncode == 2
    assert "the disk holding it is full: free some space" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
