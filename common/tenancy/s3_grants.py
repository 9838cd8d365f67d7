"""S3 grants: which tenants may read or write which buckets and prefixes, and with which credentials.

Every `s3_uri`, `input_prefix` and `output_prefix` a tenant names is checked here before any S3 call, so
the answer does not depend on whether the bucket exists. The service's own storage bucket is never
granted, under any spelling and on any endpoint: tenants reach their stored documents through job ids.
"""

from __future__ import annotations

import fnmatch
import re
import threading
from dataclasses import dataclass
from typing import Literal

from botocore.client import BaseClient

from common.settings import S3SourceProfile, Settings
from common.storage import s3_client

Mode = Literal["read", "write"]
# S3's rules for bucket names: what S3 itself would refuse, or read as another bucket, is refused here.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_LIKE = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_UNSAFE_KEY = re.compile(r"[\x00-\x1f\x7f\\]")


class InvalidLocation(ValueError):
    """Not an s3://bucket/key location that S3 could name unambiguously."""


class NotGranted(Exception):
    """No grant lets this tenant do this at this location (the same answer whether the bucket exists or not)."""

    def __init__(self, mode: Mode, uri: str) -> None:
        verb = "read from" if mode == "read" else "write to"
        super().__init__(f"no S3 grant lets this tenant {verb} {uri}")


class UnknownProfile(Exception):
    """No profile of that name is open to the tenant (whether it exists for others is not told)."""


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key (an object) or a key prefix (a folder: empty or ending in '/')."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str, *, folder: bool = False) -> S3Location:
        """Strictly parse s3://bucket/key; with folder=True the key is a prefix and gets a trailing '/'."""
        # Split by hand: urlparse reads '[' or ']' in the host as a broken IPv6 literal and raises ValueError.
        scheme, sep, rest = uri.partition("://")
        bucket, _, key = rest.partition("/")
        if scheme != "s3" or not sep or not bucket or any(c in uri for c in "?#"):
            raise InvalidLocation("give an s3://bucket/key location")
        if not is_valid_bucket(bucket):
            raise InvalidLocation("the bucket name is not a valid S3 bucket name")
        if folder and key and not key.endswith("/"):
            key += "/"
        parts = key.split("/")
        if _UNSAFE_KEY.search(key) or any(p in (".", "..") for p in parts) or "//" in key or key.startswith("/"):
            raise InvalidLocation("the key has empty, '.' or '..' parts, or control characters")
        if not folder and not key:
            raise InvalidLocation("give an object key after the bucket")
        return cls(bucket=bucket, key=key)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def is_valid_bucket(name: str) -> bool:
    return bool(_BUCKET.match(name)) and ".." not in name and not _IP_LIKE.match(name)


def _covers(entry: str, location: S3Location) -> bool:
    """A grant entry is `bucket-pattern[/key-prefix]`: a shell pattern on the bucket, a literal key prefix."""
    pattern, _, prefix = entry.partition("/")
    return fnmatch.fnmatchcase(location.bucket, pattern) and location.key.startswith(prefix)


def _granted(profile: S3SourceProfile, *, tenant_id: str) -> bool:
    return tenant_id in profile.tenants or "*" in profile.tenants


def check_profile(settings: Settings, *, tenant_id: str, name: str | None) -> None:
    """Raise UnknownProfile unless `name` is None or a profile the tenant may use."""
    if name is None:
        return
    profile = settings.s3_source_profiles.get(name)
    if profile is None or not _granted(profile, tenant_id=tenant_id):
        raise UnknownProfile(name)


def grant_for(settings: Settings, *, tenant_id: str, access: list[tuple[Mode, S3Location]],
              profile: str | None = None) -> str:
    """The name of the profile (the named one, else the first by name) that allows every (mode, location).

    Raises UnknownProfile for a named profile the tenant may not use, NotGranted otherwise.
    """
    check_profile(settings, tenant_id=tenant_id, name=profile)
    forbidden = settings.storage_bucket
    for mode, location in access:
        if location.bucket == forbidden:
            raise NotGranted(mode, location.uri)
    names = [profile] if profile else sorted(settings.s3_source_profiles)
    candidates = [(n, g) for n in names if _granted(g := settings.s3_source_profiles[n], tenant_id=tenant_id)]

    def allows(grant: S3SourceProfile, mode: Mode, location: S3Location) -> bool:
        return any(_covers(entry, location) for entry in (grant.read if mode == "read" else grant.write))

    for name, grant in candidates:
        if all(allows(grant, mode, location) for mode, location in access):
            return name
    # Name the first location no grant covers; if each is covered, but by different grants, the last.
    mode, location = next(((m, loc) for m, loc in access if not any(allows(g, m, loc) for _, g in candidates)),
                          access[-1])
    raise NotGranted(mode, location.uri)


def profile_client(settings: Settings, name: str) -> BaseClient:
    """A client with the profile's credentials; what the profile leaves out comes from the service's settings."""
    profile = settings.s3_source_profiles[name]
    if profile.use_service_credentials:
        return s3_client(settings)
    overrides = {
        "s3_endpoint_url": profile.endpoint_url or settings.s3_endpoint_url,
        "s3_region": profile.region or settings.s3_region,
        "s3_access_key_id": profile.access_key_id,
        "s3_secret_access_key": profile.secret_access_key,
    }
    return s3_client(settings.model_copy(update=overrides))


class S3Clients:
    """One client per grant, built on first use and kept: boto3 clients are thread-safe once built."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._clients: dict[str, BaseClient] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> BaseClient:
        with self._lock:
            if name not in self._clients:
                self._clients[name] = profile_client(self.settings, name)
            return self._clients[name]

    def granted(self, *, tenant_id: str, access: list[tuple[Mode, S3Location]], profile: str | None) -> BaseClient:
        """The client of the grant that allows `access` now (grants can be revoked between request and work)."""
        try:
            name = grant_for(self.settings, tenant_id=tenant_id, access=access, profile=profile)
        except UnknownProfile:  # the profile the request named was removed, or closed to the tenant, since
            mode, location = access[0]
            raise NotGranted(mode, location.uri) from None
        return self.get(name)
