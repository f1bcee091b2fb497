"""Recordings a replay cannot trust, said as such: one of a version this code does not read (it was replayed as
if it were version 1), and one whose request was edited by hand so that its hash no longer matches (it said
"nothing visible", as if the code were at fault)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]

TEAM = """\
[[specialists]]
name = "researcher"
description = "Researches facts."
prompt = "Gather the facts. Be concise."

[[specialists]]
name = "writer"
description = "Writes text."
prompt = "Write clearly."
"""
REQUEST = "Research bees and write a haiku"


def _record(tmp_path: Path) -> tuple[Path, Path]:
    team, recording = tmp_path / "team.toml", tmp_path / "bees.jsonl"
    team.write_text(TEAM)
    proc = cli_here("run", "--team", str(team), "--model", "offline", "--record", str(recording), "--quiet", REQUEST)
    assert proc.returncode == 0, proc.stderr
    return team, recording


def test_a_recording_of_an_unknown_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    team, recording = _record(tmp_path)
    lines = recording.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "version": 99})
    recording.write_text("\n".join(lines) + "\n")

    proc = cli_here("run", "--team", str(team), "--model", f"replay:{recording}", "--quiet")

    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip().splitlines() == [
        f"mcp-team: error: {recording}: a recording of version 99, and this mcp-team reads version 1 only; replay "
        f"it with the mcp-team that wrote it, or record it again (mcp-team run --record {recording} ...)"
    ]
    # In an eval, that case fails alone, saying so, with the eval's way to record it again.
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[cases]]\nname = "bees"\nrequest = "{REQUEST}"\nexpect.called = ["researcher"]\n')
    ev = cli_here("eval", str(suite), "--team", str(team), "--model", f"replay:{tmp_path}", "--quiet")
    assert ev.returncode == 1, ev.stderr
    out = " ".join(ev.stdout.split())
    assert "a recording of version 99, and this mcp-team reads version 1 only" in out, out
    assert "mcp-team eval SUITE --record DIR" in out, out


def test_a_request_edited_by_hand_says_the_recording_was_edited(tmp_path: Path) -> None:
    """The way a user "fixes" a divergence after changing a prompt: the prompt changed in the recording too."""
    team, recording = _record(tmp_path)
    team.write_text(TEAM.replace("Be concise.", "Be thorough."))
    recording.write_text(recording.read_text().replace("Be concise.", "Be thorough."))

    proc = cli_here("run", "--team", str(team), "--model", f"replay:{recording}", "--quiet")

    assert proc.returncode == 1, proc.stderr
    assert "nothing visible" not in proc.stderr, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "the hash written beside it does not match it: the recording was edited by hand" in said, said
    assert f"Record the run again (mcp-team run --record {recording} ...)" in said, said
    assert "Traceback" not in proc.stderr


def test_a_request_asked_more_often_than_recorded_is_said_so_not_blamed_on_an_edit(tmp_path: Path) -> None:
    # Through the library: a run whose team asks one recorded request once more than the recording answered it
    # (here, simply asked again) on a file nobody touched. It said the recording was edited by hand.
    import anyio

    from mcp_team.llm import ModelRequest
    from mcp_team.llm.replay import Divergence, Recording, Replay

    _, recording = _record(tmp_path)
    loaded = Recording.load(str(recording))
    first = loaded.exchanges[0]
    replay = Replay(loaded)
    request = ModelRequest.model_validate(first.request)
    asked = sum(e.hash == first.hash for e in loaded.exchanges)

    async def ask_once_more() -> str:
        for _ in range(asked):
            await replay.serve(request)
        with pytest.raises(Divergence) as caught:
            await replay.serve(request)
        return str(caught.value)

    said = anyio.run(ask_once_more)
    assert f"answered {asked} time(s), and the run asked it once more" in said, said
    assert "edited by hand" not in said
