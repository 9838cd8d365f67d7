"""Reading a job's webhook deliveries and sending one again; tenant-scoped like everything else."""

from __future__ import annotations

import hashlib

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from common.errors import NotFound
from common.jobs.service import get_job
from common.orm import utcnow
from common.services import Services
from common.webhooks import service as webhooks
from common.webhooks.models import DisabledEndpoint, WebhookAttempt, WebhookDelivery


def url_digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def job_deliveries(
    session: Session, *, tenant_id: str, job_id: str
) -> list[tuple[WebhookDelivery, list[WebhookAttempt]]]:
    """The job's deliveries, oldest first, each with its attempts; NotFound for another tenant's job."""
    get_job(session, tenant_id=tenant_id, job_id=job_id)
    deliveries = list(session.scalars(
        select(WebhookDelivery).where(WebhookDelivery.job_id == job_id).order_by(WebhookDelivery.created_at)
    ))
    attempts = list(session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id.in_([d.id for d in deliveries]))
        .order_by(WebhookAttempt.number)
    ))
    return [(d, [a for a in attempts if a.delivery_id == d.id]) for d in deliveries]


def get_delivery(session: Session, *, tenant_id: str, delivery_id: str) -> WebhookDelivery:
    """The tenant's delivery; another tenant's is as missing as an unknown one."""
    delivery = session.scalar(
        select(WebhookDelivery).where(WebhookDelivery.id == delivery_id, WebhookDelivery.tenant_id == tenant_id)
    )
    if delivery is None:
        raise NotFound(delivery_id)
    return delivery


def attempts_of(session: Session, *, delivery_id: str) -> list[WebhookAttempt]:
    return list(session.scalars(
        select(WebhookAttempt).where(WebhookAttempt.delivery_id == delivery_id).order_by(WebhookAttempt.number)
    ))


def redeliver(svc: Services, *, tenant_id: str, delivery_id: str) -> WebhookDelivery:
    """Send a delivery again, same webhook-id, on a fresh retry schedule; re-enables a URL a 410 disabled."""
    now = utcnow()
    with svc.db.session() as session:
        delivery = get_delivery(session, tenant_id=tenant_id, delivery_id=delivery_id)
        session.execute(delete(DisabledEndpoint).where(
            DisabledEndpoint.tenant_id == tenant_id, DisabledEndpoint.url_digest == url_digest(delivery.url)
        ))
        # The lease is left alone: a try in flight finishes first, so this never sends twice at once.
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery_id)
            .values(status="pending", tries=0, next_attempt_at=now, published_at=now, finished_at=None)
        )
    webhooks.publish(svc.celery, delivery_id=delivery_id)
    with svc.db.session() as session:
        return get_delivery(session, tenant_id=tenant_id, delivery_id=delivery_id)
