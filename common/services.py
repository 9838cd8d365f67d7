"""The clients every service function takes, built once by the process that owns them."""

from __future__ import annotations

from dataclasses import dataclass, field

from celery import Celery

from common.db import Database
from common.documents import Limits
from common.settings import Settings
from common.storage import Storage
from common.tenancy.rate_limit import NoLimit, RateLimiter
from common.tenancy.s3_grants import S3Clients


@dataclass(frozen=True)
class Services:
    """What the service functions need, built once by the process that owns them."""

    settings: Settings
    db: Database
    storage: Storage
    celery: Celery
    limiter: RateLimiter = field(default_factory=NoLimit)
    s3_clients: S3Clients | None = None

    @property
    def limits(self) -> Limits:
        return Limits.from_settings(self.settings)
