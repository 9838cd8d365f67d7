"""A job's and a batch's events, read from the rows that record what happened rather than from a message bus.

Every API process reads the same rows, so an event written by a worker on any host reaches a client on any API
process, on SQLite as on Postgres, and survives restarts. Ids make `Last-Event-ID` exact:
- a job's page event carries the number the page took from its job's `event_seq` as it ended. The job's row stays
  locked until that page's commit, so numbers become visible in order and a reader never steps over one;
- the job's terminal event comes after its last page event, numbered one past it;
- a batch's `batch.progress` is numbered by how many of its objects have ended (each event carries the counts),
  its terminal event one past the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from common.batches.models import Batch, BatchItem
from common.batches.progress import progress
from common.jobs.models import Job, Page
from common.jobs.states import JOB_TERMINAL

BATCH_TERMINAL = ("completed", "failed", "canceled")
ITEM_OPEN = ("queued",)


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    data: dict[str, Any]


def page_ended(session: Session, *, job_id: str, page_id: str) -> None:
    """In the transaction that wrote the page's outcome: give its event the job's next number."""
    seq = session.execute(update(Job).where(Job.id == job_id).values(event_seq=Job.event_seq + 1)
                          .returning(Job.event_seq)).scalar_one()
    session.execute(update(Page).where(Page.id == page_id).values(event_seq=seq))


def job_events(session: Session, *, job: Job, after: int) -> tuple[list[Event], bool]:
    """The job's events numbered over `after`, and whether the last of them ends the stream.

    `job` must be read in this transaction before the pages are: what it says is terminal was committed after
    every page event numbered up to its `event_seq`, so those are all visible to the next statement."""
    pages = session.scalars(select(Page).where(Page.job_id == job.id, Page.event_seq > after,
                                               Page.event_seq <= job.event_seq).order_by(Page.event_seq))
    events = [Event(page.event_seq, f"page.{'done' if page.status == 'succeeded' else 'failed'}", {
        "job_id": job.id, "page": page.index + 1, "status": page.status, "text": page.text, "error": page.error,
    }) for page in pages]
    if job.status not in JOB_TERMINAL:
        return events, False
    if after <= job.event_seq:
        events.append(Event(job.event_seq + 1, f"job.{job.status}", {
            "job_id": job.id, "status": job.status, "pages_total": job.pages_total, "pages_done": job.pages_done,
            "pages_failed": job.pages_failed, "error": job.error,
        }))
    return events, True


def batch_events(session: Session, *, batch: Batch, after: int) -> tuple[list[Event], bool]:
    """`batch.progress` when more of its objects have ended than `after` says, then its terminal event."""
    ended = session.scalar(select(func.count()).where(BatchItem.batch_id == batch.id,
                                                      BatchItem.status.not_in(ITEM_OPEN)))
    state = progress(session, batch=batch)
    data = {"batch_id": batch.id, "status": batch.status, **state.counts,
            "pages": {"total": state.pages_total, "done": state.pages_done, "failed": state.pages_failed}}
    events = [Event(ended, "batch.progress", data)] if ended > after else []
    if batch.status not in BATCH_TERMINAL:
        return events, False
    if after <= ended:
        kind = "completed" if batch.status == "completed" else batch.status
        events.append(Event(ended + 1, f"batch.{kind}", data))
    return events, True
