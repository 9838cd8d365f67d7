"""GET /jobs and GET /batches from both tenants' sides: newest first, a cursor that neither repeats nor skips while
jobs arrive, every filter, and nothing of tenant A's in tenant B's lists by any filter."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from common.batches.models import Batch
from common.jobs.models import Job
from common.orm import utcnow
from tests.conftest import KEY_A, KEY_B
from tests.documents.hostile import text_pdf

RUN = uuid.uuid4().hex[:12]
STATUSES = ("succeeded", "failed", "canceled")


def job_row(i: int, *, created_at, batch_id: str | None = None) -> Job:
    return Job(tenant_id="tenant-a", status=STATUSES[i % 3], source_kind="upload", source_uri="upload:x.png",
               filename=f"doc{i}.png", output="text", priority=("interactive", "bulk")[i % 2],
               meta={"run": RUN, "n": str(i), "parity": ("even", "odd")[i % 2]}, created_at=created_at,
               finished_at=created_at, batch_id=batch_id)


@pytest.fixture(scope="module")
def seeded(stack, tmp_path_factory):
    """Tenant A: 25 finished jobs a second apart (newest last), 5 of them in a batch, and one real upload."""
    start = utcnow() - timedelta(hours=1)
    batch = Batch(tenant_id="tenant-a", status="completed", input_bucket="b", input_prefix="in/",
                  output_bucket="b", output_prefix="out/", options_digest="x", created_at=start,
                  meta={"run": RUN})
    with stack.services.db.session() as session:
        session.add(batch)
        session.flush()
        rows = [job_row(i, created_at=start + timedelta(seconds=i), batch_id=batch.id if i < 5 else None)
                for i in range(25)]
        session.add_all(rows)
        session.flush()
        ids = [row.id for row in rows]
    pdf = text_pdf(tmp_path_factory.mktemp("lists") / "a.pdf", ["Listed after the others."])
    upload = stack.client(KEY_A).post("/jobs", files={"file": ("a.pdf", pdf.read_bytes())},
                                      data={"metadata": f'{{"run": "{RUN}", "n": "upload"}}'})
    assert upload.status_code == 202, upload.text
    return {"ids": ids, "batch_id": batch.id, "upload": upload.json()["id"], "start": start}


def listed(client, path: str = "/jobs", **params) -> tuple[list[str], str | None]:
    response = client.get(path, params={"metadata.run": RUN, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    key = "jobs" if path == "/jobs" else "batches"
    return [row["id"] for row in body[key]], body["next"]


def test_newest_first_through_the_cursor_with_jobs_arriving_between_pages(stack, seeded):
    a = stack.client(KEY_A)
    first, cursor = listed(a, limit=10)
    assert first == [seeded["upload"], *reversed(seeded["ids"][-9:])]
    # A job arriving now is newer than the cursor: it shows on a fresh first page, never on the pages that follow.
    late = job_row(99, created_at=utcnow())
    with stack.services.db.session() as session:
        session.add(late)
    seen = list(first)
    while cursor:
        more, cursor = listed(a, limit=10, cursor=cursor)
        seen += more
    assert seen == [seeded["upload"], *reversed(seeded["ids"])]
    assert listed(a, limit=1)[0] == [late.id]


def test_a_row_is_the_job_view_without_page_errors(stack, seeded):
    a = stack.client(KEY_A)
    row = a.get("/jobs", params={"metadata.n": "upload", "metadata.run": RUN}).json()["jobs"][0]
    view = a.get(f"/jobs/{seeded['upload']}").json()
    # The view's page details (errors, pages under the confidence threshold) each take a query of their own.
    view_only = ("page_errors", "low_confidence_pages", "confidence_threshold")
    assert not set(view_only) & set(row)
    for volatile in ("status", "pages_done", "pages_failed", "started_at", "finished_at", "links"):
        row.pop(volatile), view.pop(volatile)
    for field in view_only:
        view.pop(field)
    assert row == view


def test_every_filter(stack, seeded):
    a, ids, start = stack.client(KEY_A), seeded["ids"], seeded["start"]
    newest_first = list(reversed(ids))
    assert listed(a, status=["failed", "canceled"])[0] == [i for i in newest_first if ids.index(i) % 3]
    assert listed(a, priority="interactive")[0] == [i for i in newest_first if ids.index(i) % 2 == 0]
    assert listed(a, batch_id=seeded["batch_id"])[0] == newest_first[-5:]
    window = {"created_after": (start + timedelta(seconds=9.5)).isoformat(),
              "created_before": (start + timedelta(seconds=12.5)).isoformat()}
    assert listed(a, **window)[0] == [ids[12], ids[11], ids[10]]
    in_paris = {name: datetime.fromisoformat(value).astimezone(timezone(timedelta(hours=1))).isoformat()
                for name, value in window.items()}
    assert listed(a, **in_paris)[0] == [ids[12], ids[11], ids[10]]
    assert listed(a, **{"metadata.parity": "odd", "metadata.n": "7"})[0] == [ids[7]]
    assert listed(a, **{"metadata.n": "no such value"})[0] == []


def test_bad_list_parameters_are_4xx(stack, seeded):
    a = stack.client(KEY_A)
    for params in ({"limit": 201}, {"limit": 0}, {"cursor": "not-a-cursor"}, {"cursor": "W10"},
                   {"status": "lost"}, {"created_after": "yesterday"}, {"metadata.": "x"}):
        response = a.get("/jobs", params=params)
        assert response.status_code == 422 and response.json()["code"], (params, response.text)
    assert a.get("/batches", params={"cursor": "%%%"}).status_code == 422


def test_tenant_b_lists_nothing_of_tenant_as(stack, seeded):
    b = stack.client(KEY_B)
    assert listed(b)[0] == []
    assert listed(b, batch_id=seeded["batch_id"])[0] == []
    assert b.get("/jobs", params={"batch_id": seeded["batch_id"]}).json()["jobs"] == []
    # A cursor from A's list is a position, not a permission: B still sees only its own jobs.
    _, cursor = listed(stack.client(KEY_A), limit=3)
    assert all(row["id"] not in seeded["ids"] for row in b.get("/jobs", params={"cursor": cursor}).json()["jobs"])
    assert seeded["batch_id"] not in [row["id"] for row in b.get("/batches", params={"limit": 200}).json()["batches"]]


def test_batches_list_newest_first_with_progress(stack, seeded):
    a = stack.client(KEY_A)
    rows = a.get("/batches", params={"limit": 200}).json()["batches"]
    mine = next(row for row in rows if row["id"] == seeded["batch_id"])
    assert mine["status"] == "completed" and mine["metadata"] == {"run": RUN}
    created = [row["created_at"] for row in rows]
    assert created == sorted(created, reverse=True)
    first, cursor = a.get("/batches", params={"limit": 1}).json().values()
    assert len(first) == 1 and (cursor is None or a.get("/batches", params={"cursor": cursor}).status_code == 200)
