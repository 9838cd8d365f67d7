"""Retention: delete stored uploads and results once their days are up, then mark the jobs; and finish erasures
that met a storage outage (common.jobs.erase).

Objects are deleted before the row is marked, so a crash in between leaves work for the next
run rather than objects nobody will delete. A user's own s3_uri object is never touched.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import select, update

from common.jobs import erase, results
from common.jobs.models import Job, Page
from common.jobs.states import JOB_TERMINAL
from common.orm import utcnow
from common.tenancy import idempotency
from worker.context import WorkerContext

log = logging.getLogger("ocrq.retention")
BATCH = 500


def purge_expired(ctx: WorkerContext) -> dict[str, int]:
    """Run every retention rule once; returns how many of each were purged."""
    settings = ctx.settings
    counts = {"sources": 0, "results": 0, "idempotency_keys": 0}
    counts["erasures"] = erase.finish_pending(db=ctx.db, storage=ctx.storage)
    if settings.upload_retention_days:
        counts["sources"] = _purge_sources(ctx, older_than=timedelta(days=settings.upload_retention_days))
    if settings.result_retention_days:
        counts["results"] = _purge_results(ctx, older_than=timedelta(days=settings.result_retention_days))
    with ctx.db.session() as session:
        counts["idempotency_keys"] = idempotency.purge_expired(session, ttl_s=settings.idempotency_ttl_s)
    if any(counts.values()):
        log.info("purged expired data", extra=counts)
    return counts


def _purge_sources(ctx: WorkerContext, *, older_than: timedelta) -> int:
    """Stored uploads (and our copies of fetched URLs) of finished jobs created before the cutoff."""
    cutoff, purged = utcnow() - older_than, 0
    while True:
        with ctx.db.session() as session:
            rows = session.execute(select(Job.id, Job.source_key).where(
                Job.source_key.is_not(None), Job.source_expired_at.is_(None), Job.status.in_(JOB_TERMINAL),
                Job.created_at < cutoff,
            ).limit(BATCH)).all()
        if not rows:
            return purged
        for _, key in rows:
            ctx.storage.delete(key)
        with ctx.db.session() as session:
            session.execute(update(Job).where(Job.id.in_([job_id for job_id, _ in rows]))
                            .values(source_expired_at=utcnow()))
        purged += len(rows)
        if len(rows) < BATCH:
            return purged


def _purge_results(ctx: WorkerContext, *, older_than: timedelta) -> int:
    """Result objects and page text of jobs that finished before the cutoff."""
    cutoff, purged = utcnow() - older_than, 0
    while True:
        with ctx.db.session() as session:
            rows = session.execute(select(Job.id, Job.result_key).where(
                Job.expired_at.is_(None), Job.status.in_(JOB_TERMINAL), Job.finished_at < cutoff,
            ).limit(BATCH)).all()
        if not rows:
            return purged
        for _, prefix in rows:
            if prefix:
                for fmt in results.FORMATS:
                    ctx.storage.delete(results.object_key(prefix, fmt))
        ids = [job_id for job_id, _ in rows]
        with ctx.db.session() as session:
            session.execute(update(Page).where(Page.job_id.in_(ids)).values(text=None, blocks=None, text_layer=None))
            session.execute(update(Job).where(Job.id.in_(ids)).values(expired_at=utcnow(), result_key=None))
        purged += len(rows)
        if len(rows) < BATCH:
            return purged
