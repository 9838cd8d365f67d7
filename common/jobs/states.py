"""The job and page state machine. Every transition is a compare-and-set UPDATE, so a task
delivered twice changes nothing the second time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, case, exists, func, or_, select, update
from sqlalchemy.orm import Session

from common.jobs.models import Job, Page
from common.orm import statement_now, utcnow
from common.queue.leases import Lease

JOB_ACTIVE = ("queued", "running")
JOB_TERMINAL = ("succeeded", "failed", "canceled")
PAGE_ACTIVE = ("queued", "running")
PAGE_DONE = ("succeeded", "failed")


@dataclass(frozen=True)
class PageOutcome:
    text: str | None = None
    error: str | None = None
    engine: str | None = None
    engine_url: str | None = None
    model: str | None = None
    seconds: float | None = None
    width: int | None = None
    height: int | None = None
    rotation: int | None = None
    blocks: list[dict] | None = None
    confidence: float | None = None
    text_layer: dict | None = None
    source: str | None = None


def start_job(session: Session, *, job_id: str) -> bool:
    """queued -> running; False if the job already moved on."""
    result = session.execute(
        update(Job).where(Job.id == job_id, Job.status == "queued").values(status="running", started_at=utcnow())
    )
    return result.rowcount == 1


def fail_job(session: Session, *, job_id: str, reason: str) -> bool:
    """Any active state -> failed, with the reason; pages not done are failed with it."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(JOB_ACTIVE))
        .values(status="failed", error=reason, finished_at=utcnow())
    )
    if result.rowcount == 1:
        session.execute(
            update(Page)
            .where(Page.job_id == job_id, Page.status.in_(PAGE_ACTIVE))
            .values(status="failed", error=reason, finished_at=utcnow())
        )
    return result.rowcount == 1


def cancel_job(session: Session, *, job_id: str) -> bool:
    """Any active state -> canceled; pages not started are canceled, running ones finish unseen."""
    result = session.execute(
        update(Job).where(Job.id == job_id, Job.status.in_(JOB_ACTIVE)).values(status="canceled", finished_at=utcnow())
    )
    if result.rowcount == 1:
        session.execute(
            update(Page).where(Page.job_id == job_id, Page.status == "queued").values(status="canceled")
        )
    return result.rowcount == 1


def claimable(worker: str | None, delivery: str | None = None):
    """Queued, or running for a claimer whose heartbeat lease is gone or lapsed, or for this worker by this same
    message (redelivered after the pool child reading it died). Another copy of the page's message reaching the
    worker that reads it (a sweeper's, or a countdown's held while the page was republished) does not claim it."""
    claimer_alive = exists().where(Lease.name == Page.claimed_by, Lease.expires_at >= utcnow())
    mine = Page.claimed_by == worker
    if delivery is not None:
        mine = and_(mine, or_(Page.claim_delivery.is_(None), Page.claim_delivery == delivery))
    return or_(Page.status == "queued", Page.claimed_by.is_(None), mine, ~claimer_alive)


def claim_values(session: Session, *, worker: str | None, delivery: str | None) -> dict:
    """What a claim writes: running, one more attempt, started now, by this worker and message."""
    return {"status": "running", "attempts": Page.attempts + 1, "started_at": statement_now(session),
            "claimed_by": worker, "claim_delivery": delivery}


def claimable_page(page_id: str, worker: str | None, delivery: str | None) -> ColumnElement[bool]:
    """The page, active, of an active job, and not held by another live claim."""
    job_active = exists().where(Job.id == Page.job_id, Job.status.in_(JOB_ACTIVE))
    return and_(Page.id == page_id, Page.status.in_(PAGE_ACTIVE), job_active, claimable(worker, delivery))


def claim_page(session: Session, *, page_id: str, worker: str | None = None, delivery: str | None = None,
               also: ColumnElement[bool] | None = None) -> int | None:
    """Mark a page running for `worker` and count the attempt; None when it is not active, a live worker has it,
    or the condition `also` (the tenant cap's) does not hold.

    A page already 'running' may be claimed again: that is a redelivery after its worker died.
    """
    condition = claimable_page(page_id, worker, delivery)
    if also is not None:
        condition = and_(condition, also)
    row = session.execute(
        update(Page)
        .where(condition)
        .values(**claim_values(session, worker=worker, delivery=delivery))
        .returning(Page.attempts)
    ).first()
    return row[0] if row else None


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: Any) -> Any:
    """Strings (also inside lists and dicts) with each lone UTF-16 surrogate made U+FFFD and each NUL dropped: an
    engine's JSON or a file's text can hold either, and Postgres stores neither (nor UTF-8 a surrogate), so the
    page's write would fail each time."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, dict):
        return {key: storable(item) for key, item in value.items()}
    return value


def finish_page(session: Session, *, page_id: str, outcome: PageOutcome) -> bool:
    """running -> succeeded or failed, written once; a second delivery finds the page done."""
    values = {
        "status": "failed" if outcome.error else "succeeded",
        "text": storable(outcome.text),
        "error": outcome.error,
        "engine": outcome.engine,
        "engine_url": outcome.engine_url,
        "model": outcome.model,
        "seconds": outcome.seconds,
        "rotation": outcome.rotation,
        "blocks": storable(outcome.blocks),
        "confidence": outcome.confidence,
        "text_layer": storable(outcome.text_layer),
        "source": outcome.source,
        "finished_at": statement_now(session),
    }
    if outcome.width:
        values |= {"width": outcome.width, "height": outcome.height}
    result = session.execute(update(Page).where(Page.id == page_id, Page.status.in_(PAGE_ACTIVE)).values(**values))
    return result.rowcount == 1


def requeue_page(session: Session, *, page_id: str, refund_attempt: bool = False) -> bool:
    """running -> queued, for a retry after a capacity error; refund_attempt when the page was never read."""
    values = {"status": "queued", "enqueued_at": utcnow()}
    if refund_attempt:
        values["attempts"] = Page.attempts - 1
    result = session.execute(update(Page).where(Page.id == page_id, Page.status == "running").values(**values))
    return result.rowcount == 1


def mark_enqueued(session: Session, *, page_ids: list[str]) -> None:
    """Stamp queued pages as just published, so the sweeper does not take them for lost ones."""
    session.execute(update(Page).where(Page.id.in_(page_ids), Page.status == "queued").values(enqueued_at=utcnow()))


def refresh_counts(session: Session, *, job_id: str) -> None:
    """Derive pages_done and pages_failed from the pages, so repeating it is harmless; an erased job's counts stay."""
    done = select(func.count()).where(Page.job_id == job_id, Page.status.in_(PAGE_DONE)).scalar_subquery()
    failed = select(func.count()).where(Page.job_id == job_id, Page.status == "failed").scalar_subquery()
    session.execute(update(Job).where(Job.id == job_id, Job.erased_at.is_(None))
                    .values(pages_done=done, pages_failed=failed))


def complete_job_if_done(session: Session, *, job_id: str) -> str | None:
    """running -> succeeded (some page succeeded) or failed (none did), once no page is active.

    Returns the new status to exactly one caller; run it after the page's own commit so the
    last page to finish always sees every other page done.
    """
    any_active = exists().where(Page.job_id == job_id, Page.status.in_(PAGE_ACTIVE))
    any_success = exists().where(Page.job_id == job_id, Page.status == "succeeded")
    new_status = case((any_success, "succeeded"), else_="failed")
    row = session.execute(
        update(Job)
        .where(and_(Job.id == job_id, Job.status == "running", ~any_active))
        .values(
            status=new_status,
            finished_at=utcnow(),
            error=case((any_success, None), else_="no page could be read; see the per-page errors"),
        )
        .returning(Job.status)
    ).first()
    return row[0] if row else None
