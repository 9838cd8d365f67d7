"""Documents through the whole stack: page selection, order, progress, formats, hostile files and big results."""

from __future__ import annotations

import io
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from httpx_sse import connect_sse
from openpyxl import load_workbook

from common.jobs import states as job_states
from common.jobs.models import Job, Page
from tests.conftest import KEY_A, make_settings
from tests.documents import hostile
from tests.support.stack import Stack, wait_for_job

WORDS = ["alpha orchard", "bravo kettle", "charlie window", "delta ribbon", "echo marble"]


def _pdf(tmp_path, words=WORDS):
    pages = [hostile.text_page(f"Page {i + 1} {w}", size=(850, 1100), font_size=48) for i, w in enumerate(words)]
    return hostile.pdf_of(pages, tmp_path / "doc.pdf").read_bytes()


def test_selected_pages_come_back_in_order_with_progress(client, tmp_path):
    response = client.post("/jobs", files={"file": ("doc.pdf", _pdf(tmp_path))}, data={"pages": "5,2-3"})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 180
    while (job := client.get(f"/jobs/{job_id}").json())["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert job["status"] == "succeeded" and job["pages_total"] == 3 and job["pages_done"] == 3
    # Progress is told page by page: each page its own event, numbered before the job's. (Polling for a partial
    # count missed it on a loaded machine, where three pages can end between two polls.)
    with connect_sse(client, "GET", f"/jobs/{job_id}/events") as source:
        events = [(int(sse.id), sse.event) for sse in source.iter_sse() if sse.event != "message"]
    assert [kind for _, kind in events] == ["page.done"] * 3 + ["job.succeeded"], events
    assert [n for n, _ in events] == sorted({n for n, _ in events}), events

    markdown = client.get(f"/jobs/{job_id}/result").text
    markers = [markdown.find(f"<!-- ocrq:page {n} -->") for n in (2, 3, 5)]
    assert all(m >= 0 for m in markers) and markers == sorted(markers)
    assert "ocrq:page 1 " not in markdown and "ocrq:page 4 " not in markdown
    for n in (2, 3, 5):
        assert WORDS[n - 1].split()[1] in markdown
    pages = client.get(f"/jobs/{job_id}/result", params={"format": "json"}).json()["pages"]
    assert [p["page"] for p in pages] == [2, 3, 5]
    assert all(max(p["width"], p["height"]) == 1540 for p in pages)  # a Letter page rendered at ~200 DPI
    text = client.get(f"/jobs/{job_id}/result", params={"format": "text"}).text
    assert text.count("\f") == 2 and "<!--" not in text


def test_multipage_tiff(client, tmp_path):
    frames = [hostile.text_page(w, size=(900, 400), font_size=60) for w in WORDS[:3]]
    path = tmp_path / "scan.tiff"
    frames[0].save(path, save_all=True, append_images=frames[1:], compression="tiff_deflate")
    job_id = client.post("/jobs", files={"file": ("scan.tiff", path.read_bytes())}).json()["id"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "succeeded" and job["pages_total"] == 3
    markdown = client.get(f"/jobs/{job_id}/result").text
    assert [markdown.find(w.split()[1]) >= 0 for w in WORDS[:3]] == [True] * 3


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-files")
    hostile.invalid_pdf(root / "invalid.pdf")
    hostile.png_bomb(root / "bomb.png")
    hostile.truncated_png(root / "truncated.png")
    hostile.encrypted_pdf(root / "encrypted.pdf")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.mark.parametrize("name, reason", [("invalid.pdf", "PDF"), ("bomb.png", "pixels"),
                                          ("truncated.png", "truncated"), ("encrypted.pdf", "password")])
def test_hostile_file_fetched_later_fails_the_job_and_the_worker_goes_on(client, hostile_server, samples, name,
                                                                         reason):
    job = wait_for_job(client, client.post("/jobs", json={"source_url": f"{hostile_server}/{name}"}).json()["id"])
    assert job["status"] == "failed"
    assert reason.lower() in job["error"].lower(), job["error"]
    normal = client.post("/jobs", files={"file": ("t.png", (samples / "typewriter.png").read_bytes())}).json()
    assert wait_for_job(client, normal["id"])["status"] == "succeeded"


def test_one_failed_page_leaves_a_succeeded_job_with_its_error(client, stack):
    with stack.services.db.session() as session:
        session.add(Job(id="e" * 32, tenant_id="tenant-a", source_kind="upload", source_uri="x", status="running",
                        pages_total=2))
        session.add_all([Page(id="e" * 31 + "0", job_id="e" * 32, index=0, status="running"),
                         Page(id="e" * 31 + "1", job_id="e" * 32, index=1, status="running")])
    with stack.services.db.session() as session:
        job_states.finish_page(session, page_id="e" * 31 + "0", outcome=job_states.PageOutcome(text="kept text"))
        job_states.finish_page(session, page_id="e" * 31 + "1",
                               outcome=job_states.PageOutcome(error="render_timeout: took too long"))
        assert job_states.finish_page(session, page_id="e" * 31 + "1",
                                      outcome=job_states.PageOutcome(text="late")) is False
    with stack.services.db.session() as session:
        job_states.refresh_counts(session, job_id="e" * 32)
        assert job_states.complete_job_if_done(session, job_id="e" * 32) == "succeeded"
        assert job_states.complete_job_if_done(session, job_id="e" * 32) is None
    job = client.get(f"/jobs/{'e' * 32}").json()
    assert (job["status"], job["pages_done"], job["pages_failed"]) == ("succeeded", 2, 1)
    assert job["page_errors"] == [{"page": 2, "error": "render_timeout: took too long"}]
    markdown = client.get(f"/jobs/{'e' * 32}/result").text
    assert "kept text" in markdown and "<!-- ocrq:page 2 failed: render_timeout: took too long -->" in markdown


def test_large_results_go_to_object_storage_behind_a_presigned_link(tmp_path, pg_url, redis_url, s3, samples):
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3,
                             inline_result_bytes=100)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--concurrency", "1")
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("linn.png", (samples / "linn.png").read_bytes())}).json()["id"]
        job = wait_for_job(client, job_id)
        assert job["status"] == "succeeded" and "X-Amz-Expires=900" in job["links"]["download"]
        response = client.get(f"/jobs/{job_id}/result", params={"format": "text"}, follow_redirects=False)
        assert response.status_code == 303
        stored = httpx.get(response.headers["location"])
        assert stored.status_code == 200 and "LinnSequencer" in stored.text
        assert f"tenants/tenant-a/jobs/{job_id}/result.txt" in response.headers["location"]


def test_a_stored_result_deleted_from_file_storage_is_built_again_from_the_pages(tmp_path, pg_url, redis_url, s3,
                                                                                 samples):
    store = tmp_path / "store"
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3,
                             storage_url=f"file://{store}", inline_result_bytes=100)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--concurrency", "1")
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("linn.png", (samples / "linn.png").read_bytes())}).json()["id"]
        assert wait_for_job(client, job_id)["status"] == "succeeded"
        before = {fmt: client.get(f"/jobs/{job_id}/result", params={"format": fmt}) for fmt in ("markdown", "text")}
        stored = sorted(store.rglob("result.*"))
        assert {path.suffix for path in stored} >= {".md", ".txt"}
        assert not {"result.csv", "result.xlsx"} & {path.name for path in stored}  # built only when asked for
        for path in stored:
            path.unlink()
        for fmt, first in before.items():
            again = client.get(f"/jobs/{job_id}/result", params={"format": fmt})
            assert first.status_code == again.status_code == 200
            assert again.text == first.text and "LinnSequencer" in again.text
        sheets = client.get(f"/jobs/{job_id}/result", params={"format": "xlsx"})
        assert sheets.status_code == 200 and load_workbook(io.BytesIO(sheets.content)).sheetnames == ["no tables"]
