"""A model-call rate per provider endpoint shared by every replica, counted in PostgreSQL.

The `llm.limits.SharedRate` seam, filled with GCRA (the generic cell rate algorithm, a token bucket kept
as one number): a row per endpoint holds its "theoretical arrival time" `tat`. A request at time `t` fits
when `max(tat, t) + interval - burst * interval <= t`, and then moves `tat` on by one interval. The test
and the move are one conditional UPDATE, so concurrent replicas serialize on the row and never grant
more than `burst + rate * T` requests in any `T` seconds. Time is the database's clock
(`clock_timestamp()`), so replicas' clocks need not agree. A request that does not fit waits for the
moment it would and tries again.

SQLite (one machine, usually one process) keeps the in-process limiter of `llm.limits` alone.
"""

from __future__ import annotations

import anyio
import sqlalchemy as sa

BURST_SECONDS = 1.0  # a burst of up to one second's worth of requests (at least one), then a steady rate

metadata = sa.MetaData()
rates_table = sa.Table(
    "mcp_team_rates",
    metadata,
    sa.Column("endpoint", sa.String(512), primary_key=True),
    sa.Column("tat", sa.Float, nullable=False),
)

_TAKE = sa.text(
    """
    WITH n AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS t)
    UPDATE mcp_team_rates r SET tat = GREATEST(r.tat, n.t) + :interval FROM n
    WHERE r.endpoint = :endpoint AND GREATEST(r.tat, n.t) + :interval - :tau <= n.t
    RETURNING r.tat
    """
)
_WAIT = sa.text(
    """
    SELECT GREATEST(tat, extract(epoch FROM clock_timestamp())::float8) + :interval - :tau
           - extract(epoch FROM clock_timestamp())::float8
    FROM mcp_team_rates WHERE endpoint = :endpoint
    """
)


def create_tables(meta: sa.MetaData, engine: sa.Engine) -> None:
    """`create_all`, safe when replicas start at once: PostgreSQL fails a CREATE TABLE that races another
    (a duplicate type name) instead of waiting, so a lost race is tried again and then finds the table."""
    for attempt in range(3):
        try:
            meta.create_all(engine, checkfirst=True)
            return
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
            if attempt == 2:
                raise


class PostgresRate:
    """`SharedRate` on a PostgreSQL engine (the run store's)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._known: set[str] = set()

    def create(self) -> None:
        create_tables(metadata, self.engine)

    async def acquire(self, endpoint: str, requests_per_minute: float) -> None:
        interval = 60.0 / requests_per_minute
        tau = max(1.0, requests_per_minute / 60.0 * BURST_SECONDS) * interval
        while True:  # the rate lives in the database: nothing here to wait on but the time it names
            wait = await anyio.to_thread.run_sync(self._take, endpoint, interval, tau)
            if wait <= 0:
                return
            await anyio.sleep(wait)

    def _take(self, endpoint: str, interval: float, tau: float) -> float:
        """0 when the request was granted, else the seconds to wait before trying again."""
        params = {"endpoint": endpoint, "interval": interval, "tau": tau}
        with self.engine.begin() as conn:
            if endpoint not in self._known:
                conn.execute(sa.text("INSERT INTO mcp_team_rates (endpoint, tat) VALUES (:endpoint, 0) "
                                     "ON CONFLICT (endpoint) DO NOTHING"), params)  # fmt: skip
                self._known.add(endpoint)
            if conn.execute(_TAKE, params).first() is not None:
                return 0.0
            wait = conn.execute(_WAIT, params).scalar()
        return max(float(wait or 0.0), 0.001)
