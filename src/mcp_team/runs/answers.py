"""Answers to checkpoints between replicas (runs/approvals.py has the why): a replica posts a person's answer in the
shared database for the replica running the run, which takes it from its inbox."""

from __future__ import annotations

import json

import anyio
import sqlalchemy as sa

from mcp_team.handoffs.checkpoints import Checkpoint, Decision
from mcp_team.runs.approvals import Inbox, NotWaiting
from mcp_team.runs.at_rest import at_rest
from mcp_team.runs.tables import answers_table
from mcp_team.runs.types import RunRecord

INBOX_POLL = 0.5  # seconds between looks for an answer another replica posted, while a checkpoint waits
TAKE_WITHIN = 10.0  # seconds a posted answer may wait for the run's replica before it is withdrawn


def inbox_of(db: sa.Engine) -> Inbox:
    """The inbox of a replica on the shared database `db`."""

    async def inbox(run_id: str, checkpoint: Checkpoint) -> Decision:
        while True:  # another process posts it: polled, there is nothing here to wait on
            if (decision := await anyio.to_thread.run_sync(_take, db, run_id, checkpoint)) is not None:
                return decision
            await anyio.sleep(INBOX_POLL)

    return inbox


def _take(db: sa.Engine, run_id: str, checkpoint: Checkpoint) -> Decision | None:
    """The oldest answer posted for this round of `checkpoint`, deleted as it is taken (of two replicas
    looking at once, the one whose DELETE removed the row has it)."""
    t = answers_table
    match = (t.c.run_id == run_id) & (t.c.checkpoint == checkpoint.name) & (t.c.round == checkpoint.round)
    with db.begin() as conn:
        row = conn.execute(sa.select(t.c.id, t.c.decision).where(match).order_by(t.c.id).limit(1)).first()
        if row is None or conn.execute(sa.delete(t).where(t.c.id == row.id)).rowcount != 1:
            return None
    return Decision.model_validate_json(row.decision)


async def answer_elsewhere(
    db: sa.Engine, record: RunRecord, decision: Decision, name: str | None, round_: int | None = None
) -> Checkpoint:
    """Answer the checkpoint a run of another replica shows waiting at (`record.waiting`) through the shared
    database, once that replica has taken it; `NotWaiting` saying why when it cannot be answered so."""
    waiting = record.waiting
    if record.finished or waiting is None:
        raise NotWaiting(record.run_id)
    if name is not None and name != waiting.name:
        why = f"it runs on replica {record.executor_id}, where it shows waiting at '{waiting.name}' first: answer "
        raise NotWaiting(record.run_id, why + f"that one, then '{name}'")
    if round_ is not None and round_ != waiting.round:  # e.g. a retried answer to a round already answered
        raise NotWaiting(record.run_id)
    if not await post_answer(db, record.run_id, waiting, decision):
        why = f"replica {record.executor_id}, which runs it, did not take the answer within {TAKE_WITHIN:g} s"
        raise NotWaiting(record.run_id, why + ", so nothing was answered; try again")
    return waiting


async def post_answer(db: sa.Engine, run_id: str, checkpoint: Checkpoint, decision: Decision) -> bool:
    """Post `decision` for the replica running `run_id` and wait until it is taken: True; False when nobody
    took it within `TAKE_WITHIN` seconds (it is withdrawn, so it cannot land later by surprise)."""
    row = {"run_id": run_id, "checkpoint": checkpoint.name, "round": checkpoint.round,
           "decision": json.dumps(at_rest(decision.model_dump(mode="json")))}  # redacted: runs/at_rest.py  # fmt: skip

    def post() -> int:
        with db.begin() as conn:
            return int(conn.execute(sa.insert(answers_table).values(row).returning(answers_table.c.id)).scalar_one())

    def left(row_id: int) -> bool:
        with db.connect() as conn:
            return conn.execute(sa.select(answers_table.c.id).where(answers_table.c.id == row_id)).first() is not None

    def withdraw(row_id: int) -> bool:
        with db.begin() as conn:
            return conn.execute(sa.delete(answers_table).where(answers_table.c.id == row_id)).rowcount == 1

    row_id = await anyio.to_thread.run_sync(post)
    with anyio.move_on_after(TAKE_WITHIN):
        while True:  # another process takes it: polled, there is nothing here to wait on
            if not await anyio.to_thread.run_sync(left, row_id):
                return True
            await anyio.sleep(INBOX_POLL / 2)
    with anyio.CancelScope(shield=True):
        withdrawn = await anyio.to_thread.run_sync(withdraw, row_id)
    return not withdrawn  # not there to withdraw: it was taken in the last instant
