"""SIGKILL the worker that is listing a batch: the listing resumes from its last page and no object is read twice."""

from __future__ import annotations

import time

import psycopg
import pytest
from sqlalchemy import func, select

from common.batches.models import Batch, BatchItem
from common.jobs.models import Job, Page
from common.queue.names import LISTING_QUEUE
from tests.batches.support import new_bucket, read_manifest, read_object, upload, wait_for_batch, word_for, word_image
from tests.conftest import KEY_A, make_settings
from tests.support.stack import Stack

DOCUMENTS = 40
OTHERS = 20
PAGE_SIZE = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory, module_pg_url, redis_url, s3):
    # Small pages make a long listing to kill; a quick sweeper brings the batch back without waiting minutes.
    settings = make_settings(home=tmp_path_factory.mktemp("crash"), pg_url=module_pg_url, redis_url=redis_url, s3=s3,
                             batch_list_page_size=PAGE_SIZE, batch_sweep_interval_s=1, batch_stale_after_s=3,
                             stale_requeue_after_s=5)
    with Stack(settings, logs=tmp_path_factory.mktemp("crash-logs")) as running:
        yield running


def listed_pages(db, batch_id: str) -> int:
    with db.session() as session:
        return session.get(Batch, batch_id).list_pages


def blocked_on_batches(url: str) -> bool:
    """True when a session waits for a lock in an UPDATE of batches."""
    with psycopg.connect(url, autocommit=True) as watcher:
        return bool(watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE batches%%'"
        ).fetchone()[0])


def wait_until(check, *, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.timeout(600)
def test_a_listing_killed_mid_way_resumes_and_reads_each_object_once(stack, s3):
    out = s3.client()
    bucket = new_bucket(out)
    documents = {f"in/{'deep/' * (n % 3)}d{n:02d}.png": word_for(n) for n in range(DOCUMENTS)}
    objects = {key: word_image(word) for key, word in documents.items()}
    objects |= {f"in/{'deep/' * (n % 2)}other{n:02d}.txt": b"x" for n in range(OTHERS)}
    upload(out, bucket, objects)
    total_pages = -(-len(objects) // PAGE_SIZE)

    lister = stack.start_worker("--queues", LISTING_QUEUE)
    client = stack.client(KEY_A)
    batch_id = client.post("/batches", json={"input_prefix": f"s3://{bucket}/in/",
                                             "output_prefix": f"s3://{bucket}/out/"}).json()["id"]
    db = stack.services.db
    wait_until(lambda: listed_pages(db, batch_id) >= 3, what="the listing to record 3 pages")
    # Hold the batch row: the next page is listed from S3, then its transaction blocks on its first
    # statement, and the worker is killed there, in the middle of a page.
    with psycopg.connect(stack.settings.database_url) as holder:
        holder.execute("SELECT 1 FROM batches WHERE id = %s FOR UPDATE", (batch_id,))
        wait_until(lambda: blocked_on_batches(stack.settings.database_url),
                   what="the listing task to block inside its page")
        pages_at_kill = listed_pages(db, batch_id)
        lister.kill()
        holder.rollback()
    with db.session() as session:
        batch = session.get(Batch, batch_id)
        assert (batch.list_pages, batch.listing_done, batch.status) == (pages_at_kill, False, "listing")
        items = session.scalar(select(func.count()).where(BatchItem.batch_id == batch_id))
    assert pages_at_kill < total_pages
    assert items == pages_at_kill * PAGE_SIZE  # whole pages only: the killed page left nothing behind

    stack.start_worker("--beat")  # the sweeper restarts the listing from the last page recorded
    body = wait_for_batch(client, batch_id, timeout=540)
    assert body["status"] == "completed", body
    counts = (body["listed"], body["succeeded"], body["skipped"], body["failed"])
    assert counts == (len(objects), DOCUMENTS, OTHERS, 0)

    with db.session() as session:
        assert session.get(Batch, batch_id).list_pages == total_pages
        per_object = session.execute(select(Job.source_uri, func.count()).where(Job.batch_id == batch_id)
                                     .group_by(Job.source_uri)).all()
        attempts = session.execute(select(Page.attempts, func.count()).join(Job).where(Job.batch_id == batch_id)
                                   .group_by(Page.attempts)).all()
    assert len(per_object) == DOCUMENTS and {n for _, n in per_object} == {1}
    assert attempts == [(1, DOCUMENTS)]  # every page was read exactly once
    manifest = read_manifest(out, body["manifest"])
    assert sorted(line["key"] for line in manifest) == sorted(objects)
    for key, word in documents.items():
        assert word in read_object(out, f"s3://{bucket}/out/{key.removeprefix('in/')}.md")
