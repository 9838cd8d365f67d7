"""Named S3 source profiles: other credentials (or endpoints) that some tenants' batches read and write with."""

from __future__ import annotations

from botocore.client import BaseClient

from common.settings import Settings
from common.storage import s3_client


class UnknownProfile(Exception):
    """No profile of that name is open to the tenant (whether it exists for others is not told)."""


def check_profile(settings: Settings, *, tenant_id: str, name: str | None) -> None:
    """Raise UnknownProfile unless `name` is None (the service's own credentials) or a profile the tenant may use."""
    if name is None:
        return
    profile = settings.s3_source_profiles.get(name)
    if profile is None or tenant_id not in profile.tenants:
        raise UnknownProfile(name)


def profile_client(settings: Settings, name: str) -> BaseClient:
    """A client with the profile's credentials; what the profile leaves out comes from the service's settings."""
    profile = settings.s3_source_profiles[name]
    overrides = {
        "s3_endpoint_url": profile.endpoint_url or settings.s3_endpoint_url,
        "s3_region": profile.region or settings.s3_region,
        "s3_access_key_id": profile.access_key_id,
        "s3_secret_access_key": profile.secret_access_key,
    }
    return s3_client(settings.model_copy(update=overrides))
