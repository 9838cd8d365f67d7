"""All mapped classes, imported so that Base.metadata knows every table."""

from common.batches.models import Batch, BatchItem
from common.jobs.models import Job, Page
from common.orm import Base
from common.queue.leases import Lease
from common.tenancy.idempotency_keys import IdempotencyKey
from common.tenancy.models import ApiKey, Tenant
from common.webhooks.models import DisabledEndpoint, WebhookAttempt, WebhookDelivery, WebhookSecret

__all__ = [
    "ApiKey", "Base", "Batch", "BatchItem", "DisabledEndpoint", "IdempotencyKey", "Job", "Lease", "Page", "Tenant",
    "WebhookAttempt", "WebhookDelivery", "WebhookSecret",
]
