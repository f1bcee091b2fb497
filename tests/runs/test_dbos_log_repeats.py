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


def test_a_database_error_is_said_in_the_drivers_words_without_its_statement() -> None:
    # As DBOS logged them while another process held the SQLite file (benchmarks/lock_held.py): the statement over
    # several lines, its parameters and SQLAlchemy's link, in every such line.
    said = [
        "Database connection failed: (sqlite3.OperationalError) database is locked [SQL: UPDATE main.workflow_status "
        "SET owner_xid=main.workflow_status.owner_xid WHERE main.workflow_status.workflow_uuid = ? RETURNING "
        "owner_xid] [parameters: ('ebe7e185',)]. Retrying in 0.60s (attempt 1)",
        "Exception in workflow_timeout: (sqlite3.OperationalError) database is locked\n"
        "[SQL: UPDATE main.workflow_status SET status=? WHERE main.workflow_status.workflow_uuid IN "
        "(SELECT main.workflow_status.workflow_uuid \nFROM main.workflow_status \n"
        "WHERE main.workflow_status.status IN ('ENQUEUED', 'PENDING') AND x[1] = ? \n LIMIT ? OFFSET ?) "
        "RETURNING workflow_uuid]\n[parameters: ('CANCELLED', '%s', 1000, 0)]\n"
        "(Background on this error at: https://sqlalche.me/e/21/e3q8)",
        "Database connection pool exhausted: QueuePool limit of size 1 overflow 0 reached, connection timed out, "
        "timeout 120.00 (Background on this error at: https://sqlalche.me/e/21/3o7r). If this persists, look for "
        "stalled or leaked connections",
    ]
    kept = []
    for message in said:
        record = line(message)
        assert launch._without_statement(record)
        kept.append(record.getMessage())
    assert kept == [
        "Database connection failed: (sqlite3.OperationalError) database is locked. Retrying in 0.60s (attempt 1)",
        "Exception in workflow_timeout: (sqlite3.OperationalError) database is locked",
        "Database connection pool exhausted: QueuePool limit of size 1 overflow 0 reached, connection timed out, "
        "timeout 120.00. If this persists, look for stalled or leaked connections",
    ]
    other = line("Workflow abc failed: ValueError: [x] is not [y]")
    assert launch._without_statement(other) and other.getMessage() == "Workflow abc failed: ValueError: [x] is not [y]"
