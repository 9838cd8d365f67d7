"""Idempotency-Key: the first request with a key does the work; a repeat gets its stored answer.

Who is first is decided by the (tenant_id, key) unique constraint: every request inserts its
row and the one whose row landed owns the key. Nothing checks and then inserts.

    with idempotent(svc, tenant_id=t, key=k, fingerprint=fingerprint("POST /batches", body)) as slot:
        if slot.replay:
            return JSONResponse(slot.replay.body, status_code=slot.replay.status_code)
        with svc.db.session() as session:
            ...write the work's rows...
            slot.save(session, 202, body)   # the answer commits with the rows it describes
        ...publish...

A crash before that commit leaves the key claimed and nothing else; once its lock is idempotency_lock_s
old a repeat takes it over and does the work, and should the first request commit after all, its
`save` finds the key taken and rolls its rows back. So a key stands for one set of rows, whatever dies.
A slot left without `save` (the work raised) is released, so the same key can be tried again.
Calls block while a duplicate waits: run them in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from common.db import Database
from common.errors import Rejected
from common.orm import new_id, utcnow
from common.services import Services
from common.sql import insert_ignoring_conflicts
from common.tenancy.idempotency_keys import IdempotencyKey

log = logging.getLogger("ocrq.idempotency")

MAX_KEY_LENGTH = 255
POLL_S = 0.05
MAX_RETRY_AFTER_S = 30


@dataclass(frozen=True)
class Stored:
    status_code: int
    body: dict


class Slot:
    """One request's hold on a key. `replay` is the earlier answer, or None when this request must do the work."""

    def __init__(self, db: Database | None, *, row_id: str | None, token: str | None,
                 replay: Stored | None = None) -> None:
        self._db, self._row_id, self._token = db, row_id, token
        self.replay = replay
        self.saved = False

    def save(self, session: Session, status_code: int, body: dict) -> None:
        """Store the answer repeats will get, in the transaction of the work; 409 (rolling it back) if taken over."""
        if self._db is None:
            return
        stored = session.execute(
            update(IdempotencyKey)
            .where(IdempotencyKey.id == self._row_id, IdempotencyKey.lock_token == self._token,
                   IdempotencyKey.status_code.is_(None))
            .values(status_code=status_code, response=body)
        ).rowcount
        if not stored:
            log.warning("idempotency key was taken over before its answer was stored", extra={"row": self._row_id})
            raise Rejected(409, "a later request with this Idempotency-Key took it over; retry to get its answer",
                           code="idempotency_in_progress", headers={"Retry-After": "1"})
        self.saved = True

    def release(self) -> None:
        """Forget the key, so a later request with it does the work afresh."""
        if self._db is None or self.saved:
            return
        with self._db.session() as session:
            session.execute(delete(IdempotencyKey).where(
                IdempotencyKey.id == self._row_id, IdempotencyKey.lock_token == self._token,
                IdempotencyKey.status_code.is_(None),
            ))


def fingerprint(*parts: object) -> str:
    """SHA-256 of the parts as canonical JSON: equal requests give equal fingerprints whatever their key order."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@contextmanager
def idempotent(svc: Services, *, tenant_id: str, key: str | None, fingerprint: str) -> Iterator[Slot]:
    """Hold the tenant's key for one request; without a key every request does the work."""
    if key is None:
        yield Slot(None, row_id=None, token=None)
        return
    slot = claim(svc, tenant_id=tenant_id, key=key, fingerprint=fingerprint)
    if slot.replay:
        yield slot
        return
    try:
        yield slot
    finally:
        slot.release()


def claim(svc: Services, *, tenant_id: str, key: str, fingerprint: str) -> Slot:
    """Own the key, or get the stored answer of the request that did; 409 for another body or a long wait."""
    if not 0 < len(key) <= MAX_KEY_LENGTH:
        raise Rejected(400, f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters", code="invalid_idempotency_key")
    settings = svc.settings
    deadline = time.monotonic() + settings.idempotency_wait_s
    token = new_id()
    while True:
        now = utcnow()
        with svc.db.session() as session:
            insert_ignoring_conflicts(session, IdempotencyKey, [{
                "id": new_id(), "tenant_id": tenant_id, "key": key, "fingerprint": fingerprint,
                "lock_token": token, "locked_at": now, "created_at": now,
            }], keys=["tenant_id", "key"])
        with svc.db.session() as session:
            row = session.scalar(select(IdempotencyKey).where(
                IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key == key))
            if row is None:  # the owner failed and released it: insert again
                continue
            if row.lock_token == token:
                return Slot(svc.db, row_id=row.id, token=token)
            expired = now - timedelta(seconds=settings.idempotency_ttl_s)
            if row.created_at < expired:  # past its replay window: the key is free again
                session.execute(delete(IdempotencyKey).where(
                    IdempotencyKey.id == row.id, IdempotencyKey.created_at < expired))
                continue
            if row.fingerprint != fingerprint:
                raise Rejected(409, "this Idempotency-Key was used with a different request",
                               code="idempotency_key_reused")
            if row.status_code is not None:
                return Slot(None, row_id=row.id, token=None, replay=Stored(row.status_code, row.response or {}))
            if row.locked_at < now - timedelta(seconds=settings.idempotency_lock_s) and _take_over(session, row, token):
                return Slot(svc.db, row_id=row.id, token=token)
        if time.monotonic() >= deadline:
            raise _in_progress(row.locked_at, lock_s=settings.idempotency_lock_s)
        time.sleep(POLL_S)


def _in_progress(locked_at, *, lock_s: int) -> Rejected:
    """409 for a repeat while the first request is undecided: retry once it can have finished or be taken over."""
    left = (locked_at + timedelta(seconds=lock_s) - utcnow()).total_seconds()
    retry_s = max(1, math.ceil(min(left, MAX_RETRY_AFTER_S)))
    return Rejected(409, "the first request with this Idempotency-Key is still being decided (it is running, "
                    f"or it was cut off and will be taken over); retry in {retry_s} s",
                    code="idempotency_in_progress", headers={"Retry-After": str(retry_s)})


def _take_over(session, row: IdempotencyKey, token: str) -> bool:
    """Claim a key whose first request never finished (its API process died)."""
    return session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.id == row.id, IdempotencyKey.lock_token == row.lock_token,
               IdempotencyKey.status_code.is_(None))
        .values(lock_token=token, locked_at=utcnow())
    ).rowcount == 1


def purge_expired(session, *, ttl_s: int) -> int:
    """Delete keys older than their replay window; returns how many."""
    cutoff = utcnow() - timedelta(seconds=ttl_s)
    return session.execute(delete(IdempotencyKey).where(IdempotencyKey.created_at < cutoff)).rowcount
