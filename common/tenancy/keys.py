"""API keys: created once, shown once, stored as SHA-256 digests."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.orm import new_id, utcnow
from common.sql import insert_ignoring_conflicts
from common.tenancy.models import ApiKey, Tenant

KEY_PREFIX = "ocrq_"
LAST_USED_GRANULARITY = timedelta(minutes=1)


def digest(key: str) -> str:
    # Keys are 256-bit random, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()


def ensure_tenant(session: Session, *, tenant_id: str) -> None:
    insert_ignoring_conflicts(session, Tenant, [{"id": tenant_id}], keys=["id"])


def create_key(session: Session, *, tenant_id: str, name: str = "default",
               key: str | None = None) -> tuple[ApiKey, str]:
    """Create a key for the tenant (creating the tenant if new); returns the row and the plain key."""
    key = key or KEY_PREFIX + secrets.token_urlsafe(32)
    ensure_tenant(session, tenant_id=tenant_id)
    row = ApiKey(tenant_id=tenant_id, name=name, digest=digest(key), prefix=key[:12])
    session.add(row)
    session.flush()
    return row, key


def ensure_key(session: Session, *, tenant_id: str, key: str, name: str = "configured") -> None:
    """Register a key given in settings, once, though every API process of every host starts by trying."""
    ensure_tenant(session, tenant_id=tenant_id)
    row = {"id": new_id(), "tenant_id": tenant_id, "name": name, "digest": digest(key), "prefix": key[:12],
           "revoked": False, "created_at": utcnow()}
    insert_ignoring_conflicts(session, ApiKey, [row], keys=["digest"])


def tenant_for(session: Session, *, key: str) -> str | None:
    """The tenant owning an unrevoked key, or None."""
    row = session.scalar(select(ApiKey).where(ApiKey.digest == digest(key), ApiKey.revoked.is_(False)))
    if row is None:
        return None
    now = utcnow()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_GRANULARITY:
        session.execute(update(ApiKey).where(ApiKey.id == row.id).values(last_used_at=now))
    return row.tenant_id


def list_keys(session: Session, *, tenant_id: str | None = None) -> list[ApiKey]:
    query = select(ApiKey).order_by(ApiKey.created_at)
    if tenant_id:
        query = query.where(ApiKey.tenant_id == tenant_id)
    return list(session.scalars(query))


def revoke(session: Session, *, key_id: str) -> bool:
    return session.execute(update(ApiKey).where(ApiKey.id == key_id).values(revoked=True)).rowcount == 1


def any_key(session: Session) -> bool:
    return session.scalar(select(ApiKey.id).limit(1)) is not None


def parse_configured(entries: list[str]) -> list[tuple[str, str]]:
    """OCRQ_API_KEYS entries are tenant:key; a bare key belongs to tenant 'default'."""
    pairs = []
    for entry in entries:
        tenant, sep, key = entry.partition(":")
        pairs.append((tenant, key) if sep else ("default", tenant))
    return pairs
