"""Where durable runs live and who runs them: state directory, database URL, executor id, app version.

Resolution, flags first: `--state-dir` / `MCP_TEAM_STATE_DIR`, else `$XDG_STATE_HOME/mcp-team`, else
`~/.local/state/mcp-team`. `--database-url` / `MCP_TEAM_DATABASE_URL`, else the SQLite file
`runs.sqlite` in the state directory; `postgresql://user:password@host:port/db` selects PostgreSQL (the
same code; the database is created on first start). `--executor-id` / `MCP_TEAM_EXECUTOR_ID` names this
process for recovery (see `executor.py`). On PostgreSQL, replicas share a run queue:
`MCP_TEAM_GLOBAL_MAX_RUNS` caps the runs executing at once across all replicas, `MCP_TEAM_RUNS_PER_REPLICA`
those of one replica (default: four per CPU, `default_runs_per_replica`); `MCP_TEAM_LEASE_SECONDS` is how
long a replica's heartbeat lease lasts before another replica takes its runs over (see `replicas.py`).
The variables are read from the `environ` mapping given to `resolve` (the CLI passes the process environment);
this module never reads `os.environ` itself, so a library caller that passes none gets flags and defaults only.
Light on purpose: nothing here imports DBOS or SQLAlchemy.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_team.errors import ConfigError

REPLAY_FORMAT = 3  # 3: concurrent branches are child workflows (runs/branches.py)
"""Bump when a change alters what a replay depends on beyond the engine's own code: how branches are started
(branches), the stored value format (serializer), the run workflow's inputs (workflow.RunInput) or the step
names (runtime). Runs left unfinished by a version with another replay format are not resumed (they are marked
interrupted, finished handoffs kept); with the same format any version resumes them. (A change in the engine's
own prompts makes a replay ask other steps than those recorded: such a run is interrupted then, see
runtime.ReplayDiverged.)"""

APP_VERSION = f"mcp-team.r{REPLAY_FORMAT}"
"""DBOS's application version: DBOS dequeues only the workflows of the version that is running, so it names the
replay format, not the release: an upgrade that records runs the same way resumes the runs an older one left."""

EXECUTOR_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")


@dataclass(frozen=True)
class DurableConfig:
    state_dir: Path
    database_url: str
    executor_id: str | None = None  # None: the first free `<hostname>-<n>` (see executor.py)
    app_version: str = APP_VERSION
    max_runs: int | None = None  # runs executing at once across every replica (PostgreSQL); None: no cap
    runs_per_replica: int | None = None  # runs one replica takes at once (`resolve`: 4 per CPU); None: no cap
    lease_seconds: float = 10.0  # a replica silent this long is dead: another one takes its runs over
    # Seconds between polls of the run queue and DBOS's internal one (PostgreSQL): a run started with `start_run`
    # or taken over starts within a poll. Each poll is a few queries: at 0.05 s an idle replica used a fifth of
    # a core, at 0.5 s 4.5% (DBOS's default, 1 s: 3.6%).
    queue_poll: float = 0.5

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def sqlite_path(self) -> Path | None:
        return Path(self.database_url.removeprefix("sqlite:///")) if self.is_sqlite else None

    @property
    def redacted_url(self) -> str:
        """The URL without its password, for messages."""
        return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", self.database_url)


def resolve(
    *,
    state_dir: str | os.PathLike[str] | None = None,
    database_url: str | None = None,
    executor_id: str | None = None,
    max_runs: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> DurableConfig:
    """The configuration from flags (arguments), then `environ` (None: no variables); `ConfigError` naming what
    to fix."""
    env: Mapping[str, str] = {} if environ is None else environ
    if state_dir is None:
        state_dir = env.get("MCP_TEAM_STATE_DIR") or None
    if state_dir is None:
        xdg = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
        state_dir = Path(xdg) / "mcp-team"
    state = Path(state_dir).expanduser().absolute()
    url = database_url or env.get("MCP_TEAM_DATABASE_URL") or f"sqlite:///{state / 'runs.sqlite'}"
    executor_id = executor_id or env.get("MCP_TEAM_EXECUTOR_ID") or None
    if executor_id is not None and not EXECUTOR_ID_PATTERN.match(executor_id):
        raise ConfigError(
            f"executor id {executor_id!r} is not valid: use up to 100 letters, digits, '_', '.', ':' or '-', "
            f"starting with a letter or digit (--executor-id / MCP_TEAM_EXECUTOR_ID)"
        )
    max_runs = max_runs if max_runs is not None else _number(env, "MCP_TEAM_GLOBAL_MAX_RUNS", int)
    lease = _number(env, "MCP_TEAM_LEASE_SECONDS", float)
    per_replica = _number(env, "MCP_TEAM_RUNS_PER_REPLICA", int) or default_runs_per_replica()
    if max_runs is not None:  # no replica runs more than all of them may (DBOS refuses such a queue)
        per_replica = min(per_replica, max_runs)
    return DurableConfig(state_dir=state, database_url=normalize_url(url), executor_id=executor_id,
                         max_runs=max_runs, runs_per_replica=per_replica, lease_seconds=lease or 10.0)  # fmt: skip


def default_runs_per_replica() -> int:
    """Runs one replica runs at once by default: four per CPU this process may use (at least 4). A replica with no
    cap started every run it was asked for, and the other replicas took only what it put on the shared queue (4 of
    60 runs: +9% for the second replica); capped, what is beyond goes to the queue, where a replica with room
    takes it. Four per CPU: a run's own work is Python, one core's at most, and most of a run is waiting on a
    model's answer (at 200 ms a call, about 10 runs keep one core busy), so fewer would leave a replica idle on
    a model-bound load, and many more would keep the runs a second replica could take."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(4, 4 * cpus)


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> Any:
    """A positive number from the environment, or None; `ConfigError` naming the variable otherwise."""
    raw = env.get(name)
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if not 0 < value < math.inf:  # nan and inf too: a lease of either never expires, so no run is taken over
        raise ConfigError(f"{name}={raw!r} is not a positive {'whole ' if kind is int else ''}number; fix or unset it")
    return value


def normalize_url(url: str) -> str:
    """`sqlite:///abs/path` or `postgresql+psycopg://...`; `ConfigError` for anything else."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    hint = "use sqlite:///ABSOLUTE/PATH.sqlite or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
    if scheme in ("sqlite", "sqlite+pysqlite"):
        path = url.split("://", 1)[1]
        if not path.startswith("/") or path.strip("/") in ("", ":memory:"):
            raise ConfigError(f"database URL {url!r}: the SQLite file needs a path ({hint}; --database-url)")
        return f"sqlite:///{Path(path[1:]).expanduser().absolute()}"
    if scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        if not parts.hostname or not parts.path.strip("/"):
            raise ConfigError(f"database URL {_redact(url)!r} needs a host and a database name ({hint})")
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    raise ConfigError(
        f"database URL {_redact(url)!r}: unsupported database {scheme or '(none)'!r}; {hint} "
        f"(--database-url / MCP_TEAM_DATABASE_URL)"
    )


def _redact(url: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
