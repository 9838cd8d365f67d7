"""Shared fixtures: a real Postgres database, Redis, SeaweedFS S3, and real ocrq workers.

Postgres and Redis: OCRQ_TEST_PG_ADMIN (an admin URL; the `postgres` maintenance database by default) and
OCRQ_TEST_REDIS, if they answer; otherwise private servers started on free loopback ports in a temporary
folder (tests/support/servers.py) and stopped at the end of the session. The tests create the databases
they use. Only when neither answers nor can be started (no binaries) are the tests needing them skipped,
or with CI=true failed, saying what to install.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import redis

from common.settings import S3SourceProfile, Settings
from tests.support import seaweed, servers
from tests.support.engine_server import running_cpu_engine
from tests.support.stack import Stack

PG_ADMIN = os.environ.get("OCRQ_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("OCRQ_TEST_REDIS", "redis://127.0.0.1:6379/0")
BUCKET = "ocrq-test"  # the service's storage: never a tenant's source, listing or output
USER_BUCKET = "ocrq-test-user"  # a bucket of the tenants', granted to all of them by SERVICE_GRANT
SERVICE_GRANT = {"service": S3SourceProfile(tenants=["*"], read=["*"], write=["*"], use_service_credentials=True)}
KEY_A = "ocrq_test_tenant_a_key_0000000000000000"
KEY_B = "ocrq_test_tenant_b_key_0000000000000000"
# Real scans and PDFs from OCRmyPDF's test suite (attribution and licences in samples/SOURCES.rst).
SAMPLES = Path(__file__).resolve().parent / "samples"
# The URLs this session resolved, and the private servers it started (stopped in pytest_sessionfinish).
_resolved: dict[str, str] = {}
_private: dict[str, servers.PostgresServer | servers.RedisServer] = {}


def _missing(what: str, exc: Exception):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI and is not reachable: {exc}", pytrace=False)
    pytest.skip(f"{what} not reachable: {exc}")


def _resolve(what: str, configured: str, answers, server_class, *, missing=_missing) -> str:
    """`configured` if it answers, else the URL of a private server started for this session."""
    if what in _resolved:
        return _resolved[what]
    try:
        answers(configured)
        _resolved[what] = configured
    except (psycopg.Error, redis.RedisError, OSError) as unreachable:
        try:
            server = server_class().start()
        except servers.ServerError as exc:
            return missing(what, RuntimeError(f"{unreachable}; and no private server could start: {exc}"))
        _private[what] = server
        _resolved[what] = server.url
    return _resolved[what]


def pg_admin(**how) -> str:
    """A Postgres URL with the right to create databases."""
    return _resolve("Postgres", PG_ADMIN, lambda url: psycopg.connect(url, connect_timeout=3).close(),
                    servers.PostgresServer, **how)


def redis_admin(**how) -> str:
    return _resolve("Redis", REDIS_URL, lambda url: redis.Redis.from_url(url, socket_connect_timeout=3).ping(),
                    servers.RedisServer, **how)


def pytest_configure(config):
    """With test processes (pytest-xdist), the controller finds or starts Postgres and Redis once, for all of them:
    each process reads the URLs from the environment it inherits."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    for what, find in (("OCRQ_TEST_PG_ADMIN", pg_admin), ("OCRQ_TEST_REDIS", redis_admin)):
        url = find(missing=lambda *_: None)  # none at all: each test process reports it for its own tests
        if url:
            os.environ[what] = url


# The longest files (each a minute or near it on two cores, BENCHMARKS.md), run first: a test process that takes one
# at the end would run on alone while the other has finished.
LONGEST_FIRST = (
    "jobs/test_gpu_path.py", "jobs/test_gpu_path_recovery.py", "office/test_office.py",
    "multihost/test_many_hosts.py", "batches/test_ingest.py", "recovery/test_worker_crash.py",
    "recovery/test_held_messages.py", "queue/test_page_redelivery.py", "recovery/test_api_crash.py",
    "queue/test_stale_sweeper.py", "batches/test_listing_crash.py", "cli/test_readme_examples.py",
    "cli/test_embedded.py", "recovery/test_restarts.py",
    "recovery/test_slow_child_start.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.path.as_posix()
        return next((n for n, name in enumerate(LONGEST_FIRST) if path.endswith(f"tests/{name}")), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order, and every process sorts alike


def pytest_terminal_summary(terminalreporter):
    configured = {"Postgres": PG_ADMIN, "Redis": REDIS_URL}
    for what, server in _private.items():
        terminalreporter.write_line(f"{what}: nothing answered at {configured[what]}; "
                                    f"this session started a private one at {server.url} ({server.dir})")
    # What a test records with record_property("summary", text), shown whatever -r and -q say.
    for report in terminalreporter.stats.get("passed", []):
        for name, text in getattr(report, "user_properties", []):
            if name == "summary":
                terminalreporter.write_sep("-", report.nodeid)
                terminalreporter.write_line(text)


def pytest_sessionfinish(session):
    for server in _private.values():
        server.close()


@pytest.fixture(scope="session")
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.fail(f"sample documents are missing at {SAMPLES}")
    return SAMPLES


@contextmanager
def fresh_database():
    """A new Postgres database migrated to head, dropped afterwards."""
    from common import migrate

    name = f"ocrq_t_{uuid.uuid4().hex[:12]}"
    admin_url = pg_admin()
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        _missing("Postgres", exc)
    admin.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        migrate.upgrade(url)
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def pg_url():
    """The database of this test session."""
    with fresh_database() as url:
        yield url


@pytest.fixture()
def own_pg_url():
    """A database of the test's own, for tests whose workers sweep or count everything: the session's database
    holds the other tests' leftovers (queued, running and failed pages of tenant-a and tenant-b)."""
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="module")
def module_pg_url():
    """A database of the module's own, for a module-scoped stack whose worker runs the sweepers (`--beat`)."""
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="session")
def redis_url():
    return redis_admin()


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    server = seaweed.start(tmp_path_factory.mktemp("seaweed"))
    server.client().create_bucket(Bucket=BUCKET)
    server.client().create_bucket(Bucket=USER_BUCKET)
    yield server
    server.stop()


def make_settings(*, home: Path, pg_url: str, redis_url: str, s3: seaweed.SeaweedS3, **overrides) -> Settings:
    values = dict(
        home=home, database_url=pg_url, broker_url=redis_url, broker_key_prefix=f"t{uuid.uuid4().hex[:8]}:",
        storage_url=f"s3://{BUCKET}", s3_endpoint_url=s3.endpoint, s3_access_key_id=seaweed.ACCESS_KEY,
        s3_secret_access_key=seaweed.SECRET_KEY, api_keys=[f"tenant-a:{KEY_A}", f"tenant-b:{KEY_B}"],
        net_allowlist=["127.0.0.1/32"], stale_requeue_after_s=30, task_soft_time_limit_s=60,
        task_time_limit_s=90, visibility_timeout_s=120, s3_source_profiles=SERVICE_GRANT,
        # The vLLM path's layout runs rapidocr's detector on every page (seconds here): on only where tested.
        engine_layout=False,
    )
    return Settings(**(values | overrides))


@pytest.fixture(scope="session")
def settings(tmp_path_factory, pg_url, redis_url, s3) -> Settings:
    return make_settings(home=tmp_path_factory.mktemp("ocrq-home"), pg_url=pg_url, redis_url=redis_url, s3=s3)


@pytest.fixture(scope="session")
def stack(settings, tmp_path_factory):
    """The API in-process and one real Celery worker process, on Postgres, Redis and S3."""
    with Stack(settings, logs=tmp_path_factory.mktemp("logs")) as running:
        running.start_worker()
        yield running


@pytest.fixture()
def client(stack):
    return stack.client(KEY_A)


@pytest.fixture(scope="module")
def api_url(stack, settings):
    """The API over real HTTP, for the clients that speak to a URL; the session's stack runs the worker."""
    from api.app import create_app
    from tests.support.live_server import live_server

    with live_server(create_app(settings)) as url:
        yield url


@pytest.fixture()
def other_client(stack):
    return stack.client(KEY_B)


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """`ocrq serve` on the embedded default in a subprocess, shared by the browser and CLI tests."""
    from tests.support.embedded import EmbeddedServer

    with EmbeddedServer(tmp_path_factory.mktemp("embedded") / "home") as server:
        yield server


@pytest.fixture(scope="module")
def cpu_engine_server():
    with running_cpu_engine() as server:
        yield server


@pytest.fixture
def server(cpu_engine_server):
    """The shared server with no fault armed and an empty request log."""
    cpu_engine_server.reset()
    yield cpu_engine_server
    cpu_engine_server.reset()
