"""Webhooks: a job's delivery log, redelivery, and the tenant's signing secret."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ServicesDep, SessionDep, TenantDep
from common.webhooks import log as webhook_log
from common.webhooks import secrets as webhook_secrets
from common.webhooks.models import WebhookSecret
from common.webhooks.schemas import JobWebhooks, WebhookDeliveryView, WebhookSecretView

router = APIRouter(tags=["webhooks"])


def _secret_view(row: WebhookSecret) -> WebhookSecretView:
    return WebhookSecretView(secret=row.current, previous=row.previous, previous_until=row.previous_until,
                             rotated_at=row.rotated_at)


@router.get("/jobs/{job_id}/webhooks", response_model=JobWebhooks, responses={404: {}})
def job_webhooks(job_id: str, session: SessionDep, tenant: TenantDep) -> JobWebhooks:
    """Every webhook delivery of the job, with one entry per attempt (status code, latency, error)."""
    rows = webhook_log.job_deliveries(session, tenant_id=tenant, job_id=job_id)
    return JobWebhooks(job_id=job_id, deliveries=[WebhookDeliveryView.of(d, attempts) for d, attempts in rows])


@router.post("/webhooks/{delivery_id}/redeliver", status_code=202, response_model=WebhookDeliveryView,
             responses={404: {}})
def redeliver(delivery_id: str, svc: ServicesDep, tenant: TenantDep) -> WebhookDeliveryView:
    """Send a delivery again with the same webhook-id; this also re-enables a URL that answered 410."""
    delivery = webhook_log.redeliver(svc, tenant_id=tenant, delivery_id=delivery_id)
    with svc.db.session() as session:
        return WebhookDeliveryView.of(delivery, webhook_log.attempts_of(session, delivery_id=delivery_id))


@router.get("/webhooks/secret", response_model=WebhookSecretView)
def get_secret(session: SessionDep, tenant: TenantDep) -> WebhookSecretView:
    """The tenant's signing secret (`whsec_…`), created on first use."""
    return _secret_view(webhook_secrets.get_or_create(session, tenant_id=tenant))


@router.post("/webhooks/secret/rotate", response_model=WebhookSecretView)
def rotate_secret(svc: ServicesDep, session: SessionDep, tenant: TenantDep) -> WebhookSecretView:
    """A new signing secret; the old one keeps signing beside it for OCRQ_WEBHOOK_ROTATION_OVERLAP_S."""
    row = webhook_secrets.rotate(session, tenant_id=tenant, overlap_s=svc.settings.webhook_rotation_overlap_s)
    return _secret_view(row)
