"""All mapped classes, imported so that Base.metadata knows every table."""

from common.models.base import Base
from common.models.batches import Batch, BatchItem
from common.models.idempotency import IdempotencyKey
from common.models.jobs import Job, Page
from common.models.leases import Lease
from common.models.tenants import ApiKey, Tenant
from common.models.webhooks import DisabledEndpoint, WebhookAttempt, WebhookDelivery, WebhookSecret

__all__ = [
    "ApiKey", "Base", "Batch", "BatchItem", "DisabledEndpoint", "IdempotencyKey", "Job", "Lease", "Page", "Tenant",
    "WebhookAttempt", "WebhookDelivery", "WebhookSecret",
]
