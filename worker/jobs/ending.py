"""A job's end on the worker: closing it after its last page, failing it, and its batch item afterwards."""

from __future__ import annotations

import logging

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from common import faults, outages, tracing
from common.jobs import ending
from common.jobs import states as job_states
from common.jobs.ending import JobEnded
from common.jobs.models import Job, Page
from worker.batches import results as batch_results
from worker.context import WorkerContext
from worker.jobs.results import needs_storing, store_result

log = logging.getLogger("ocrq.jobs")


def close_in(session: Session, ctx: WorkerContext, *, job_id: str) -> JobEnded | bool | None:
    """In the transaction that wrote a page: refresh the job's counts and end it if no page is left.

    The job's row is locked after the page's own update, so of two last pages finishing at once the second waits
    for the first to commit and then sees every page done. Returns what ended, True when the job's result must be
    stored before it may end (outside this transaction), or None.
    """
    job = session.scalar(select(Job).where(Job.id == job_id).with_for_update()
                         .execution_options(populate_existing=True))
    if job is None or job.status != "running" or session.scalar(select(exists().where(
            Page.job_id == job_id, Page.status.in_(job_states.PAGE_ACTIVE)))):
        job_states.refresh_counts(session, job_id=job_id)
        return None
    if needs_storing(session, settings=ctx.settings, job=job):
        job_states.refresh_counts(session, job_id=job_id)
        return True
    status = job_states.complete_job_if_done(session, job_id=job_id)
    return status and ending.record_end(session, settings=ctx.settings, job_id=job_id, status=status)


def close_job_if_done(ctx: WorkerContext, *, job_id: str) -> None:
    """End the job if no page is left (its stored result first), exactly once; for callers holding no transaction."""
    with ctx.db.session() as session:
        closed = close_in(session, ctx, job_id=job_id)
    finish_closing(ctx, job_id=job_id, closed=closed)


def finish_closing(ctx: WorkerContext, *, job_id: str, closed: JobEnded | bool | None) -> None:
    """After the page's commit: store the result if it must be, end the job, and announce its end."""
    if closed is True:
        try:
            with tracing.span("result.store", job=job_id):
                reason = store_result(ctx, job_id=job_id)
        except outages.OUTAGE_TYPES as exc:
            if outages.outage_of(exc) != "storage":
                raise
            # Every page is written: the job stays running until the sweeper, which closes such jobs, stores it.
            log.warning("storage unreachable while storing the job's result; closed later: %s", exc.__class__.__name__)
            return
        if reason:
            fail_job(ctx, job_id=job_id, reason=reason)
            return
        with ctx.db.session() as session:
            closed = close_in(session, ctx, job_id=job_id)
    if isinstance(closed, JobEnded):
        faults.reach(ctx.settings, "after_job_final")
        ending.announce(ctx.app, ctx.settings, closed, close_item=lambda ended: close_item(ctx, job_id=ended.job_id))


def fail_job(ctx: WorkerContext, *, job_id: str, reason: str) -> None:
    """Fail a job not yet ended, its webhook event in the same commit; then the once-only follow-up."""
    with ctx.db.session() as session:
        failed = job_states.fail_job(session, job_id=job_id, reason=reason)
        ended = failed and ending.record_end(session, settings=ctx.settings, job_id=job_id, status="failed")
    ending.announce(ctx.app, ctx.settings, ended or None, close_item=lambda ended: close_item(ctx, job_id=ended.job_id))


def close_item(ctx: WorkerContext, *, job_id: str) -> None:
    """An ended batch job's item: its result under the output prefix and its record, once.

    A crash before this runs is made good by the batch sweeper, which finishes items of ended jobs.
    """
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        if job is None or job.status not in job_states.JOB_TERMINAL:
            return
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    batch_results.item_finished(ctx, job=job, pages=pages, status=job.status)
