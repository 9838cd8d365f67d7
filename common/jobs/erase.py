"""Erasing a job now, at its tenant's request: cancel it if it runs, delete every stored object and every text of
it, and keep a tombstone row (id, tenant, counts, timestamps) so the tenant reads "erased", not "not found".

`erased_at` is set first and `erase_pending` stays true until storage and database are both clean, so an erase that
meets a storage outage is finished by the retention sweep once storage answers; running it again is harmless.
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from common import outages
from common.db import Database
from common.jobs import ending, results
from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.object_keys import result_prefix, source_key
from common.orm import utcnow
from common.services import Services
from common.storage import Storage
from common.webhooks.models import WebhookAttempt, WebhookDelivery

log = logging.getLogger("ocrq.erase")
SWEEP_BATCH = 100


def begin(session: Session, *, settings, job_id: str) -> ending.JobEnded | None:
    """In the caller's transaction: cancel the job if it is active and mark it erased (once). Returns its end, if
    this canceled it, for the caller to announce after the commit."""
    ended = None
    if job_states.cancel_job(session, job_id=job_id):
        ended = ending.record_end(session, settings=settings, job_id=job_id, status="canceled")
    session.execute(update(Job).where(Job.id == job_id, Job.erased_at.is_(None))
                    .values(erased_at=utcnow(), erase_pending=True))
    return ended


def erase_job(svc: Services, *, job: Job) -> bool:
    """Erase one of the tenant's jobs (found by the caller); True once nothing of it is left but the tombstone."""
    with svc.db.session() as session:
        ended = begin(session, settings=svc.settings, job_id=job.id)
    ending.announce(svc.celery, svc.settings, ended)
    return finish_or_defer(db=svc.db, storage=svc.storage, job_id=job.id)


def finish_or_defer(*, db: Database, storage: Storage, job_id: str) -> bool:
    """Finish now; on a storage outage leave it pending for the retention sweep and say so."""
    try:
        finish(db=db, storage=storage, job_id=job_id)
        return True
    except outages.OUTAGE_TYPES as exc:
        if outages.outage_of(exc) != "storage":
            raise
        log.warning("storage unreachable while erasing job %s; the retention sweep finishes it: %s",
                    job_id, exc.__class__.__name__, extra={"job_id": job_id})
        return False


def finish(*, db: Database, storage: Storage, job_id: str) -> None:
    """Delete the job's objects (every key the service ever writes for it), then its text, pages and webhook bodies,
    and clear what the row says of the document. Objects go first: a crash between leaves it pending, not lost."""
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is None or not job.erase_pending:
            return
        tenant_id = job.tenant_id
    prefix = result_prefix(tenant_id=tenant_id, job_id=job_id)
    for key in (source_key(tenant_id=tenant_id, job_id=job_id), *(results.object_key(prefix, fmt)
                                                                  for fmt in results.FORMATS)):
        storage.delete(key)
    with db.session() as session:
        deliveries = select(WebhookDelivery.id).where(WebhookDelivery.job_id == job_id)
        session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries)))
        session.execute(delete(WebhookDelivery).where(WebhookDelivery.job_id == job_id))
        session.execute(delete(Page).where(Page.job_id == job_id))
        session.execute(update(Job).where(Job.id == job_id).values(
            erase_pending=False, source_uri="", source_key=None, result_key=None, filename=None, meta=None,
            error=None, webhook_url=None, pages_spec=None, doc_kind=None, size_bytes=None, source_profile=None,
        ))


def finish_pending(*, db: Database, storage: Storage) -> int:
    """Finish erasures left pending by an outage; how many were finished (the retention sweep runs it)."""
    with db.session() as session:
        ids = list(session.scalars(select(Job.id).where(Job.erased_at.is_not(None), Job.erase_pending)
                                   .limit(SWEEP_BATCH)))
    for job_id in ids:
        finish(db=db, storage=storage, job_id=job_id)
    return len(ids)
