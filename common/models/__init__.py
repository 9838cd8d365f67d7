"""All mapped classes, imported so that Base.metadata knows every table."""

from common.models.base import Base
from common.models.jobs import Job, Page
from common.models.tenants import ApiKey, Tenant

__all__ = ["ApiKey", "Base", "Job", "Page", "Tenant"]
