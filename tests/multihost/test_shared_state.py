"""What hosts of one deployment do to the same database and broker at once, each a fault the many-hosts test met."""

from __future__ import annotations

import threading
import uuid
from urllib.parse import urlsplit

import httpx
from sqlalchemy import func, select

from common.db import Database
from common.settings import Settings
from common.storage import make_storage
from common.tenancy import keys
from common.tenancy.models import ApiKey
from tests.conftest import BUCKET
from tests.support import seaweed
from worker.queue.liveness import scheduler_lease


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


def test_hosts_spelling_one_redis_differently_share_one_scheduler_lease():
    """Each host has its own .env: the same Redis with or without its database index, user name or password,
    in another case, must still elect one scheduler (the many-hosts test saw two hosts run it)."""
    def lease(url: str, prefix: str = "p:") -> str:
        return scheduler_lease(Settings(broker_url=url, broker_key_prefix=prefix))

    same = {lease(url) for url in ("redis://10.0.0.5:6379/0", "redis://10.0.0.5", "redis://default@10.0.0.5:6379",
                                   "redis://:secret@10.0.0.5:6379/0", "rediss://10.0.0.5:6379/0?ssl_cert_reqs=none",
                                   "redis://10.0.0.5:6379?db=0", "REDIS://10.0.0.5:6379/")}
    assert len(same) == 1, same
    others = {lease("redis://10.0.0.5:6379/1"), lease("redis://10.0.0.5:6380/0"), lease("redis://10.0.0.6:6379/0"),
              lease("redis://10.0.0.5:6379/0", prefix="q:"), lease("redis://10.0.0.5:6379?db=2")}
    assert len(others) == 5 and not others & same


def test_presigned_links_name_the_public_s3_endpoint_and_work_there(s3):
    """Hosts reach S3 on a private address; a tenant's client follows the API's links from outside, through the
    address OCRQ_S3_PUBLIC_ENDPOINT_URL names (a proxy or ingress in front of the same S3, here its Host header)."""
    port = s3.endpoint.rsplit(":", 1)[1]
    public = f"http://files.example.test:{port}"
    settings = Settings(storage_url=f"s3://{BUCKET}", s3_endpoint_url=s3.endpoint, s3_public_endpoint_url=public,
                        s3_access_key_id=seaweed.ACCESS_KEY, s3_secret_access_key=seaweed.SECRET_KEY)
    storage, key = make_storage(settings), f"links/{uuid.uuid4().hex}.txt"
    storage.put(key, b"read from outside")
    link = urlsplit(storage.presign(key, ttl_s=60))
    assert f"{link.scheme}://{link.netloc}" == public
    through_proxy = httpx.get(link._replace(netloc=urlsplit(s3.endpoint).netloc).geturl(),
                              headers={"Host": link.netloc}, timeout=10)
    assert through_proxy.status_code == 200 and through_proxy.content == b"read from outside"
