"""Opening the runs database and DBOS: the start-up checks (version, reachability, executor id, tables),
DBOS's migrations, its launch on our own database engine and event loop, and its shutdown.

Only DBOS's public API. `prepare` and `migrate` block: call them in a thread. `launch` runs on the event loop
(briefly blocking it: the schema is migrated already): DBOS runs the workflows it dequeues on the loop of the
thread that launched it, and ours must run on the server's loop.

Each process gives DBOS an executor id of its own (`<executor id>+<6 hex digits>`): DBOS then finds nothing of
an earlier process to recover at launch, and every resume is ours (runs/recovery.py), made by the process that
holds the run's executor id, onto that process's own queue (`here_queue`), which no other process listens to.
So all the workflows of one run (the run's and its branches', runs/branches.py) always run in one process.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
import time
from typing import Any

import sqlalchemy as sa
from dbos import DBOS

from mcp_team.errors import ConfigError
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import open_engine, reason_of
from mcp_team.runs.executor import ExecutorLease, acquire
from mcp_team.runs.serializer import JSONSerializer
from mcp_team.runs.sql_store import SqlRunStore
from mcp_team.telemetry.content import RedactingFilter

EXECUTOR_THREADS = 16  # DBOS's executor: at most this many threads
RUN_QUEUE = "mcp_team_runs"  # PostgreSQL: runs any replica may start (runs/replicas.py)


def here_queue(executor_id: str) -> str:
    """The queue of the process holding `executor_id`: resumed and taken-over runs go there, and only there."""
    return f"mcp_team_here_{executor_id}"


def check(config: DurableConfig) -> None:
    """The start-up checks alone (database reachable and not newer, state directory writable, an executor id
    free), then let go: for a server that must fail at once on bad input, before it serves. Blocking."""
    store, lease = prepare(config)
    lease.release()
    store.dispose()


def prepare(config: DurableConfig) -> tuple[SqlRunStore, ExecutorLease]:
    """Blocking checks before DBOS touches the database: versions, reachability, executor id, tables."""
    db = open_engine(config)
    try:
        store = SqlRunStore(db)
        store.check_version()
        lease = acquire(config, db)
        try:
            store.create()
        except BaseException:
            lease.release()
            raise
    except sa.exc.SQLAlchemyError as exc:
        db.dispose()
        raise ConfigError(f"the runs database {config.redacted_url} is not usable: {reason_of(exc)}") from None
    except BaseException:
        db.dispose()
        raise
    return store, lease


def migrate(config: DurableConfig) -> None:
    """Create or upgrade DBOS's tables (blocking), so that `launch` on the event loop only reads them."""
    try:
        DBOS.migrate(config.database_url)
    except Exception as exc:
        raise ConfigError(f"could not start durable runs on {config.redacted_url}: {reason_of(exc)}") from None


def launch(config: DurableConfig, db: sa.Engine, executor_id: str) -> str:
    """Launch DBOS for this process (call it on the event loop that runs the workflows); its executor id."""
    dbos_id = f"{executor_id}+{secrets.token_hex(3)}"
    dbos_config: dict[str, Any] = {
        "name": "mcp-team",
        "system_database_url": config.database_url,
        "serializer": JSONSerializer(),
        "executor_id": dbos_id,
        "application_version": config.app_version,
        "log_level": "WARNING",
        "enable_otlp": False,
        "run_migrations": False,  # `migrate` did, off the loop
        # DBOS runs its database calls in a thread pool that is unbounded by default: 1,000 concurrent runs
        # started about 600 threads, which stay. More threads than database connections only wait in the
        # connection pool (SQLite: one connection), so a few do the same work.
        "max_executor_threads": EXECUTOR_THREADS,
    }
    if config.sqlite_path is not None:
        dbos_config["system_database_engine"] = db
        # On SQLite, DBOS's notification listener polls, sleeping this long between polls (1 s by default), and
        # `DBOS.destroy` joins it: every close (each `mcp-team run`) waited up to a second for that sleep. A poll
        # with nothing awaited reads no database, so waking ten times a second costs next to nothing.
        dbos_config["notification_listener_polling_interval_sec"] = 0.1
    _log_to_current_stderr(logging.getLogger("dbos"))
    DBOS(config=dbos_config)  # type: ignore[arg-type]
    logging.getLogger("dbos").addFilter(_without_traceback)
    logging.getLogger("dbos").addFilter(_without_statement)
    logging.getLogger("dbos").addFilter(_REPEATS)  # once, however many times runs open in a process
    DBOS.listen_queues([here_queue(executor_id)] if config.is_sqlite else [here_queue(executor_id), RUN_QUEUE])
    try:
        DBOS.launch()
    except Exception as exc:
        destroy()
        raise ConfigError(f"could not start durable runs on {config.redacted_url}: {reason_of(exc)}") from None
    return dbos_id


async def register_here_queue(config: DurableConfig, executor_id: str) -> None:
    """Declare this process's queue (after launch; after recovery has moved the runs to resume onto it)."""
    await DBOS.register_queue_async(here_queue(executor_id), polling_interval_sec=config.queue_poll,
                                    on_conflict="always_update")  # fmt: skip


DBOS_LINE = "%(asctime)s [%(levelname)8s] (%(name)s:%(filename)s:%(lineno)s) %(message)s"  # as DBOS writes its own


class CurrentStderr(logging.Handler):
    """Writes to whatever `sys.stderr` is when a line is logged. DBOS's own console handler keeps the stderr of the
    moment it was made; where that is replaced and closed (a test harness capturing output, a host redirecting it)
    DBOS's next start failed on flushing it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def _log_to_current_stderr(logger: logging.Logger) -> None:
    """Give DBOS's logger our console handler before DBOS starts: it adds its own only to a logger without one."""
    if not logger.handlers:  # a user's own handlers stay
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter(DBOS_LINE, "%H:%M:%S"))
        handler.addFilter(RedactingFilter())  # DBOS's lines may quote a workflow's input or error: no secret in logs
        logger.addHandler(handler)
        logger.propagate = False


# What DBOS logs when a run is cancelled (by its client, `cancel_run`, a stop): the run's record says it already.
_CANCELLATION_LINES = ("outcome was not recorded: the workflow is no longer owned", "Asyncio task cancelled for")
_RECORDED_ENDS = ("Cancelled", "RunInterrupted")  # exception names whose run's record says what happened


def _without_traceback(record: logging.LogRecord) -> bool:
    """DBOS logs a failed or cancelled workflow with its traceback, and a cancelled one as an error; the run's
    record and its caller already say what went wrong, so keep DBOS's line for a failure, without the traceback,
    and none for a cancellation or an interrupted run (`MCP_TEAM_LOG=debug` keeps everything)."""
    if logging.getLogger("mcp_team").isEnabledFor(logging.DEBUG):
        return True
    if any(line in str(record.msg) for line in _CANCELLATION_LINES):
        return False
    if record.exc_info and (exc := record.exc_info[1]) is not None:
        if any(name in type(exc).__name__ for name in _RECORDED_ENDS):
            return False
        record.msg, record.args = f"{record.getMessage().rstrip(': ')}: {type(exc).__name__}: {exc}", ()
        record.exc_info, record.exc_text = None, None
    return True


# What DBOS's threads say at each poll while the database is away: its queue threads (20 a second a queue), and
# on PostgreSQL, about once a second each, the queue lister, the background-jobs lock, the notification listener
# and its connection retries (three lines each: a 12 s outage wrote 140 lines).
_POLLED_LINES = (
    "Exception encountered in queue thread for ",
    "Exception reloading queue ",
    "Exception listing queues",
    "Exception taking the background_jobs lock",
    "Notification listener error",
    "Notification poller error",
    "Notifier error",
    "Fallback notification poll failed",
    "Fallback workflow event poll failed",
    "Database connection failed",
    "Exception polling schedules",  # with the traceback in its text, 40 lines a second
)
_TRACEBACK = "Traceback (most recent call last):"
_SQLALCHEMY_LINK = re.compile(r"\s*\(Background on this error at: [^)]*\)")
# SQLAlchemy's error text quotes the statement and its parameters after the driver's words, each block ending
# where the next one, the link, the message's own sentence or the text ends (a statement may hold brackets).
_END = r"(?=\s*(?:\[parameters: |\(Background on this error|\. |\.$|$))"
_STATEMENT = re.compile(r"\s*\[SQL: .*?\]" + _END + r"|\s*\[parameters: .*?\]" + _END, re.S)


def _without_statement(record: logging.LogRecord) -> bool:
    """DBOS's lines about a database error (a lock, a pool wait) quote SQLAlchemy's whole error: the statement over
    several lines, its parameters, a link. An operator needs the driver's words ("database is locked"): the line
    keeps those, in one line (`MCP_TEAM_LOG=debug` keeps everything)."""
    if logging.getLogger("mcp_team").isEnabledFor(logging.DEBUG):
        return True
    message = record.getMessage()
    if "[SQL: " in message or "(Background on this error at: " in message:
        record.msg, record.args = _one_line(message), ()
    return True


def _one_line(message: str) -> str:
    """`message` in one line, without SQLAlchemy's statement, parameters and link: the driver's words."""
    return " ".join(_SQLALCHEMY_LINK.sub("", _STATEMENT.sub("", message)).split())


REPEAT_EVERY = 30.0  # seconds between two of those lines of one queue


class RepeatsFilter(logging.Filter):
    """One line of each of DBOS's polling errors (per queue, per thread) every `REPEAT_EVERY` seconds, in one line,
    saying how many it left out: a 15 s PostgreSQL outage wrote 2,745 of them (75 MB an hour); the runs pause and
    go on without them."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, tuple[float, int]] = {}  # per queue and kind of line: when one was let through, left out

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(_POLLED_LINES):
            return True
        key = message.split(":", 1)[0]  # the line's kind and its queue, without the error's own text
        at = time.monotonic()
        last, left_out = self._last.get(key, (-REPEAT_EVERY, 0))
        if at - last < REPEAT_EVERY:
            self._last[key] = (last, left_out + 1)
            return False
        self._last[key] = (at, 0)
        if _TRACEBACK in message:  # the line, then the exception the traceback ends with
            said, trace = message.split(_TRACEBACK, 1)
            lines = trace.strip("\n").splitlines()
            frames = [i for i, line in enumerate(lines) if line.startswith("  ")]  # the exception follows the last
            message = said + " ".join(lines[frames[-1] + 1 :] if frames else lines[-1:])
        message = _one_line(message)
        if left_out:
            message += f" ({left_out} more like it in the last {at - last:.0f} s)"
        record.msg, record.args = message, ()
        return True


_REPEATS = RepeatsFilter()


def destroy() -> None:
    DBOS.destroy(destroy_registry=False)
