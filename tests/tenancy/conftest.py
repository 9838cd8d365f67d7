"""A stack for tenancy tests: results always in S3 (so presigned links and retention have objects to
act on), at most one running page per tenant, and a worker with two processes to show that cap."""

from __future__ import annotations

import pytest

from tests.conftest import KEY_A, KEY_B, fresh_database, make_settings
from tests.support.stack import Stack


@pytest.fixture(scope="session")
def tenancy_pg_url():
    """A database of its own: the per-tenant cap counts the tenant's running pages, and other stacks of the
    session leave pages of tenant-a running in theirs (workers killed on purpose)."""
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="session")
def tenancy_settings(tmp_path_factory, tenancy_pg_url, redis_url, s3):
    return make_settings(home=tmp_path_factory.mktemp("tenancy"), pg_url=tenancy_pg_url, redis_url=redis_url, s3=s3,
                         storage_url="s3://ocrq-test/tenancy", inline_result_bytes=1,
                         tenant_max_running_pages=1, tenant_defer_s=0.2)


@pytest.fixture(scope="session")
def tenancy_stack(tenancy_settings, tmp_path_factory):
    with Stack(tenancy_settings, logs=tmp_path_factory.mktemp("tenancy-logs")) as running:
        running.start_worker("--concurrency", "2")
        yield running


@pytest.fixture()
def tenant_a(tenancy_stack):
    return tenancy_stack.client(KEY_A)


@pytest.fixture()
def tenant_b(tenancy_stack):
    return tenancy_stack.client(KEY_B)
