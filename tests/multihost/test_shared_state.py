"""What hosts of one deployment do to the same database and broker at once, each a fault the many-hosts test met."""

from __future__ import annotations

import threading
import uuid

from sqlalchemy import func, select

from common.db import Database
from common.tenancy import keys
from common.tenancy.models import ApiKey


def test_api_processes_starting_together_register_a_configured_key_once(pg_url):
    """Two APIs (two hosts) start on a fresh deployment: each registers the keys of OCRQ_API_KEYS. The second's
    insert waits on the first's uncommitted row, then must find it there, not fail on the unique digest."""
    db, key, tenant = Database(pg_url), f"ocrq_race_{uuid.uuid4().hex}", f"race-{uuid.uuid4().hex[:8]}"
    errors: list[BaseException] = []

    def second_api() -> None:
        try:
            with db.session() as session:
                keys.ensure_key(session, tenant_id=tenant, key=key)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        with db.session() as first:
            keys.ensure_key(first, tenant_id=tenant, key=key)
            racer = threading.Thread(target=second_api)
            racer.start()
            racer.join(timeout=1.5)  # blocked on the first's row (or, before the fix, past its SELECT)
        racer.join(timeout=30)
        assert not racer.is_alive() and errors == [], errors
        with db.session() as session:
            assert session.scalar(select(func.count()).where(ApiKey.digest == keys.digest(key))) == 1
    finally:
        db.dispose()
