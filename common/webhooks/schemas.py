"""Response shapes of the webhook routes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from common.webhooks.models import WebhookAttempt, WebhookDelivery

DeliveryStatus = Literal["pending", "delivered", "failed"]
AttemptOutcome = Literal["sending", "delivered", "retry", "failed", "disable", "lost"]


class WebhookAttemptView(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    number: int
    started_at: datetime
    outcome: AttemptOutcome
    status_code: int | None
    latency_ms: int | None
    error: str | None


class WebhookDeliveryView(BaseModel):
    id: str
    webhook_id: str
    event_type: str
    url: str
    status: DeliveryStatus
    next_attempt_at: datetime | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None
    attempts: list[WebhookAttemptView]

    @classmethod
    def of(cls, delivery: WebhookDelivery, attempts: list[WebhookAttempt]) -> WebhookDeliveryView:
        return cls(
            id=delivery.id, webhook_id=delivery.webhook_id, event_type=delivery.event_type, url=delivery.url,
            status=delivery.status, last_error=delivery.last_error, created_at=delivery.created_at,
            next_attempt_at=delivery.next_attempt_at if delivery.status == "pending" else None,
            finished_at=delivery.finished_at, attempts=[WebhookAttemptView.model_validate(a) for a in attempts],
        )


class JobWebhooks(BaseModel):
    job_id: str
    deliveries: list[WebhookDeliveryView]


class WebhookSecretView(BaseModel):
    """Verify with `secret`; during a rotation, messages also carry a signature made with `previous`."""

    model_config = ConfigDict(from_attributes=True)

    secret: str
    previous: str | None
    previous_until: datetime | None
    rotated_at: datetime | None
