"""DBOS's queue threads log an error at every poll (20 a second a queue) while the database is away: mcp-team
lets one line a queue through every 30 s, saying how many it left out (a 15 s PostgreSQL outage wrote 2,745)."""

from __future__ import annotations

import logging

import pytest

from mcp_team.runs import launch


def line(message: str) -> logging.LogRecord:
    return logging.LogRecord("dbos", logging.WARNING, __file__, 1, message, None, None)


def test_polling_errors_are_one_line_a_queue_every_30_s(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(launch.time, "monotonic", lambda: clock[0])
    repeats = launch.RepeatsFilter()
    down = "Exception encountered in queue thread for {}: connection refused (attempt {})"
    kept = [r.getMessage() for i in range(100) for q in ("runs", "_dbos_internal_queue")
            if repeats.filter(r := line(down.format(q, i)))]  # fmt: skip
    assert kept == [down.format("runs", 0), down.format("_dbos_internal_queue", 0)]
    other = line("Workflow abc failed: ValueError")
    assert repeats.filter(other) and other.getMessage() == "Workflow abc failed: ValueError"  # others untouched
    clock[0] += 31
    later = line(down.format("runs", 100))
    assert repeats.filter(later)
    assert later.getMessage() == down.format("runs", 100) + " (99 more like it in the last 31 s)"
    assert not repeats.filter(line(down.format("runs", 101)))
