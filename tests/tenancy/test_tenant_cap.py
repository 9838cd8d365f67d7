"""At most N running pages per tenant: enforced at claim time, on Postgres and SQLite, under races."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from common import migrate
from common.db import Database
from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.orm import utcnow
from common.queue.leases import Lease
from common.settings import Settings
from tests.documents.hostile import text_pdf
from tests.support.rollback import RolledBackDatabase
from tests.support.stack import wait_for_job
from worker.jobs import tenant_cap


def _database(request, tmp_path, *, rolled_back: bool) -> Database:
    if request.param == "sqlite":  # a file of its own per test: isolated already
        url = f"sqlite:///{tmp_path / 'cap.db'}"
        migrate.upgrade(url)
        return Database(url)
    url = request.getfixturevalue("pg_url")
    return RolledBackDatabase(url) if rolled_back else Database(url)


@pytest.fixture(params=["postgres", "sqlite"])
def db(request, tmp_path):
    """On Postgres, one transaction rolled back after the test: these claims need isolation, not a commit."""
    database = _database(request, tmp_path, rolled_back=True)
    yield database
    database.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def committed_db(request, tmp_path):
    """Real commits on a pool of connections, for claims raced from several threads."""
    database = _database(request, tmp_path, rolled_back=False)
    yield database
    database.dispose()


def capped(tmp_path, limit: int) -> Settings:
    return Settings(home=tmp_path, tenant_max_running_pages=limit)


def new_job(db: Database, *, pages: int) -> tuple[str, list[str]]:
    """A running job of a fresh tenant with `pages` queued pages; returns the tenant and the page ids."""
    tenant, job_id = f"cap-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with db.session() as session:
        session.add(Job(id=job_id, tenant_id=tenant, status="running", source_kind="upload", source_uri="x"))
        session.flush()
        session.add_all([Page(id=f"{job_id[:16]}{i:016x}", job_id=job_id, index=i) for i in range(pages)])
    return tenant, [f"{job_id[:16]}{i:016x}" for i in range(pages)]


def claim(db: Database, page_id: str, settings: Settings) -> int | None:
    with db.session() as session:
        return tenant_cap.claim_page(session, page_id=page_id, settings=settings)


def test_a_tenant_at_its_cap_waits_while_others_run(db, tmp_path):
    settings = capped(tmp_path, 1)
    _, mine = new_job(db, pages=2)
    _, theirs = new_job(db, pages=1)
    assert claim(db, mine[0], settings) == 1
    with pytest.raises(tenant_cap.OverCap) as over:
        claim(db, mine[1], settings)
    assert over.value.lane == "bulk"
    assert claim(db, theirs[0], settings) == 1
    with db.session() as session:
        waiting = session.get(Page, mine[1])
        assert (waiting.status, waiting.attempts) == ("queued", 0)  # refused, not counted as an attempt
        job_states.finish_page(session, page_id=mine[0], outcome=job_states.PageOutcome(text="done"))
    assert claim(db, mine[1], settings) == 1


def test_a_redelivered_page_does_not_wait_for_itself(db, tmp_path):
    settings = capped(tmp_path, 1)
    _, pages = new_job(db, pages=1)
    assert claim(db, pages[0], settings) == 1
    assert claim(db, pages[0], settings) == 2


def test_a_page_left_running_by_a_dead_worker_stops_counting(db, tmp_path):
    settings = capped(tmp_path, 1)
    _, pages = new_job(db, pages=2)
    assert claim(db, pages[0], settings) == 1
    with db.session() as session:
        session.execute(update(Page).where(Page.id == pages[0]).values(
            started_at=utcnow() - timedelta(seconds=settings.task_time_limit_s + 61)))
    assert claim(db, pages[1], settings) == 1


def test_a_page_running_for_a_worker_whose_lease_lapsed_stops_counting(db, tmp_path):
    # The worker group was killed: until a sweeper queues its page again, the page must not hold the tenant's cap.
    settings = capped(tmp_path, 1)
    _, pages = new_job(db, pages=2)
    dead, alive = f"worker:dead-{uuid.uuid4().hex[:8]}", f"worker:alive-{uuid.uuid4().hex[:8]}"
    with db.session() as session:
        for name, expires_in in ((dead, -1), (alive, 30)):
            session.add(Lease(name=name, holder=name, pages=[], beat_at=utcnow(),
                              expires_at=utcnow() + timedelta(seconds=expires_in)))
        assert job_states.claim_page(session, page_id=pages[0], worker=alive) == 1
    with pytest.raises(tenant_cap.OverCap):  # a live claimer's page counts
        claim(db, pages[1], settings)
    with db.session() as session:
        session.execute(update(Page).where(Page.id == pages[0]).values(claimed_by=dead))
    assert claim(db, pages[1], settings) == 1


def test_finished_or_canceled_pages_are_not_claimed(db, tmp_path):
    settings = capped(tmp_path, 1)
    _, pages = new_job(db, pages=2)
    with db.session() as session:
        job_id = session.scalar(select(Page.job_id).where(Page.id == pages[0]))
        job_states.cancel_job(session, job_id=job_id)
    assert claim(db, pages[0], settings) is None


def test_a_page_claimed_after_another_finished_is_stamped_after_it_whatever_the_workers_clock(db, tmp_path,
                                                                                           monkeypatch):
    # The stamps come from the database as each statement runs: a worker whose clock is behind (another host, or a
    # stamp taken before waiting for the tenant's lock) must not show the tenant two of its pages running at once.
    settings = capped(tmp_path, 1)
    _, pages = new_job(db, pages=2)
    assert claim(db, pages[0], settings) == 1
    with db.session() as session:
        assert job_states.finish_page(session, page_id=pages[0], outcome=job_states.PageOutcome(text="one"))
    behind = lambda: utcnow() - timedelta(seconds=30)  # noqa: E731
    for module in (job_states, tenant_cap):
        monkeypatch.setattr(module, "utcnow", behind)
    assert claim(db, pages[1], settings) == 1
    with db.session() as session:
        first, second = (session.get(Page, page_id) for page_id in pages)
        assert second.started_at >= first.finished_at >= first.started_at
        assert abs((second.started_at - utcnow()).total_seconds()) < 10


def test_racing_workers_never_pass_the_cap(committed_db, tmp_path):
    # Each thread claims on a connection of its own, so the advisory lock is really contended: no rollback here.
    db, settings = committed_db, capped(tmp_path, 2)

    def race(page_id: str, start: threading.Barrier) -> str:
        start.wait(timeout=30)
        try:
            return "claimed" if claim(db, page_id, settings) == 1 else "gone"
        except tenant_cap.OverCap:
            return "deferred"

    for _ in range(5):  # one race can miss a bad interleaving; several rarely all do
        _, pages = new_job(db, pages=8)
        start = threading.Barrier(len(pages))
        with ThreadPoolExecutor(len(pages)) as pool:
            outcomes = list(pool.map(race, pages, [start] * len(pages)))
        assert sorted(outcomes) == ["claimed"] * 2 + ["deferred"] * 6


def test_a_worker_with_two_processes_runs_one_page_of_a_capped_tenant_at_a_time(tenancy_stack, tenant_a, tmp_path):
    assert tenancy_stack.settings.tenant_max_running_pages == 1
    pdf = text_pdf(tmp_path / "two.pdf", [f"Page {n}: the quick brown fox jumps over the lazy dog." for n in (1, 2)])
    job_id = tenant_a.post("/jobs", files={"file": ("two.pdf", pdf.read_bytes())}, data={"ocr": "always"}).json()["id"]
    assert wait_for_job(tenant_a, job_id)["status"] == "succeeded"
    with tenancy_stack.services.db.session() as session:
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.started_at)))
    assert [p.attempts for p in pages] == [1, 1]
    for before, after in zip(pages, pages[1:]):
        assert after.started_at >= before.finished_at, "two pages of one tenant ran at once"



@pytest.mark.parametrize("limit", [0, 1])
def test_a_second_copy_of_a_pages_message_on_its_live_worker_does_not_claim_it_again(db, tmp_path, limit):
    # A sweeper's copy and a countdown's held copy of one page both reached the worker that reads it: two pool
    # children claimed it (attempts 2) and both read it. Only the same message, redelivered after the child reading
    # it died, may claim a page its own live worker holds.
    settings = capped(tmp_path, limit)
    _, pages = new_job(db, pages=1)
    alive = f"worker:alive-{uuid.uuid4().hex[:8]}"
    with db.session() as session:
        session.add(Lease(name=alive, holder=alive, pages=[], beat_at=utcnow(),
                          expires_at=utcnow() + timedelta(seconds=30)))

    def claim_as(delivery: str) -> int | None:
        with db.session() as session:
            return tenant_cap.claim_page(session, page_id=pages[0], settings=settings, worker=alive, delivery=delivery)

    assert claim_as("first-message") == 1
    assert claim_as("sweepers-copy") is None
    assert claim_as("first-message") == 2  # its child died and the broker gave the message back
    with db.session() as session:
        session.execute(update(Page).where(Page.id == pages[0]).values(status="queued"))  # requeued by a sweeper
    assert claim_as("sweepers-copy") == 3
