"""The README's "Library use" examples run as they are, each in a fresh interpreter, and print what they say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support import HANG_GUARD, clean_env

README = Path(__file__).parent.parent / "README.md"


def library_examples() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Library use\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def run_example(code: str, tmp_path: Path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_section_has_the_four_examples() -> None:
    examples = library_examples()
    assert len(examples) == 4
    assert 'Specialist(name="scout"' in examples[0]
    assert "Budgets(max_handoffs=10" in examples[1]
    assert "class EchoModel" in examples[2]
    assert "use_tracing(" in examples[3]


def test_own_specialists(tmp_path: Path) -> None:
    out = run_example(library_examples()[0], tmp_path)
    first = out.splitlines()[0]
    assert first.startswith("complete ") and "'scout'" in first and "'pitch'" in first


def test_budgets_and_settings_say_what_they_cut(tmp_path: Path) -> None:
    out = run_example(library_examples()[1], tmp_path)
    assert re.match(r"(complete|partial) 1[02] handoffs", out), out
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert any("2 of the 12" in n and "handoff budget (10" in n and "max_handoffs" in n for n in notes), out
    assert any("10 handoffs" in n and "at most 4 model calls" in n and "max_concurrency" in n for n in notes), out


def test_writing_a_model(tmp_path: Path) -> None:
    out = run_example(library_examples()[2], tmp_path)
    assert out.strip() == "complete Hello from echo.", out


def test_tracing_in_memory(tmp_path: Path) -> None:
    out = run_example(library_examples()[3], tmp_path)
    names = [line.split(" ")[0:2] for line in out.splitlines()]
    assert ["invoke_agent", "supervisor"] in names
    assert ["execute_tool", "transfer_to_analyst"] in names
    assert ["execute_tool", "calculate"] in names


def test_the_examples_type_check_as_a_users_code(tmp_path: Path) -> None:
    # Outside the repository (none of its mypy settings), as a user's project: the package's py.typed marker
    # is what lets mypy read mcp_team's annotations at all.
    for i, code in enumerate(library_examples()):
        (tmp_path / f"example{i}.py").write_text(code)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy_cache"), "."],
        capture_output=True, text=True, timeout=HANG_GUARD * 3, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues found in 4 source files" in proc.stdout
