"""A private Postgres, Redis and SeaweedFS on free loopback ports, migrated, with the Settings that reach them:
what the benchmarks that run the whole stack start (bench/soak.py, bench/feed.py), removed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import migrate
from common.settings import Settings
from tests.support import seaweed
from tests.support.servers import PostgresServer, RedisServer


@dataclass
class PrivateServices:
    settings: Settings
    pg: PostgresServer
    redis: RedisServer
    s3: seaweed.SeaweedS3


@contextmanager
def private_services(work: Path, *, tenant: str, api_key: str, **settings: object) -> Iterator[PrivateServices]:
    """Services under `work`, one bucket and one key of `tenant`; `settings` are the rest of the Settings."""
    bucket = f"ocrq-{tenant}"
    with PostgresServer() as pg, RedisServer() as redis:
        s3 = seaweed.start(work / "seaweed")
        try:
            s3.client().create_bucket(Bucket=bucket)
            migrate.upgrade(pg.url)
            yield PrivateServices(
                settings=Settings(
                    home=work / "home", database_url=pg.url, broker_url=redis.url, broker_key_prefix=f"{tenant}:",
                    storage_url=f"s3://{bucket}", s3_endpoint_url=s3.endpoint, s3_access_key_id=seaweed.ACCESS_KEY,
                    s3_secret_access_key=seaweed.SECRET_KEY, api_keys=[f"{tenant}:{api_key}"], **settings),
                pg=pg, redis=redis, s3=s3)
        finally:
            s3.stop()
