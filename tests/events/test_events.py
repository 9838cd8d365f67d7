"""Live events with a real client over HTTP: two `ocrq api` processes on one Postgres, the upload on one and the
stream on the other; each page arrives once, as it is read, while the job runs; a client that drops after its third
event and reconnects with Last-Event-ID gets every later event exactly once; tenant B cannot follow A's job or
batch."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.conftest import KEY_A, KEY_B
from tests.documents.hostile import text_pdf
from tests.support.api_process import ApiProcess

PAGES = 4
STRIP = (612, 160)  # a strip of a page in points: a quarter of the pixels to read, the same one line of text
A = {"Authorization": f"Bearer {KEY_A}"}


@pytest.fixture(scope="module")
def apis(stack, settings, tmp_path_factory):
    """Two API processes beside the session stack's worker."""
    logs = tmp_path_factory.mktemp("events-api")
    # A heartbeat on any poll that finds nothing new for 0.1 s. Polled every 0.25 s, a four-page job on the CPU
    # engine could bring something new to every poll (a page every 0.2 s), and a run saw no heartbeat at all.
    quick = {"OCRQ_EVENTS_HEARTBEAT_S": "0.1", "OCRQ_EVENTS_POLL_S": "0.05"}
    started = [ApiProcess(settings, log=logs / f"api-{n}.log", extra_env=quick) for n in range(2)]
    try:
        yield [api.wait_ready() for api in started]
    finally:
        for api in started:
            api.stop()


def read_events(response: httpx.Response, *, stop_after: int | None = None,
                comments: list[str] | None = None) -> list[dict]:
    """Parse the stream until it ends (or `stop_after` events), noting when each event arrived."""
    events, current = [], {}
    for line in response.iter_lines():
        if line.startswith(":") and comments is not None:
            comments.append(line)
        elif line.startswith(("id:", "event:", "data:")):
            field, _, value = line.partition(":")
            current[field] = value.strip()
        elif line == "" and "event" in current:
            events.append({"id": int(current["id"]), "type": current["event"], "data": json.loads(current["data"]),
                           "at": time.monotonic()})
            current = {}
            if stop_after and len(events) == stop_after:
                break
    return events


def test_a_client_on_the_other_api_follows_pages_in_order_and_resumes(apis, tmp_path):
    uploader, follower = apis
    pdf = text_pdf(tmp_path / "four.pdf", [f"Page number {n} of the report." for n in range(1, PAGES + 1)],
                   page_size=STRIP)
    job_id = httpx.post(f"{uploader.url}/jobs", headers=A, files={"file": ("four.pdf", pdf.read_bytes())},
                        data={"output": "text", "ocr": "always"}).json()["id"]
    url = f"{follower.url}/jobs/{job_id}/events"
    heartbeats: list[str] = []
    with httpx.stream("GET", url, headers=A, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        first = read_events(response, stop_after=3, comments=heartbeats)
        running = httpx.get(f"{follower.url}/jobs/{job_id}/pages", headers=A).json()
    assert [e["type"] for e in first] == ["page.done"] * 3, first
    assert running["status"] == "running" and len(running["pages"]) >= 3 and running["next_after"] is not None
    with httpx.stream("GET", url, headers=A | {"Last-Event-ID": str(first[-1]["id"])}, timeout=60) as response:
        rest = read_events(response, comments=heartbeats)
    assert heartbeats and set(heartbeats) == {": keep-alive"}
    every = first + rest
    ids = [e["id"] for e in every]
    assert ids == sorted(set(ids)), ids  # nothing twice, in order
    # Each page once, in the order they were read: the worker may take a job's pages in any order (a suite run saw
    # its one worker receive page 4 first), and `ocrq serve` reads them two at a time.
    assert sorted(e["data"]["page"] for e in every[:-1]) == list(range(1, PAGES + 1))
    assert every[-1]["type"] == "job.succeeded" and every[-1]["data"]["pages_done"] == PAGES
    assert all(f"Page number {e['data']['page']}" in e["data"]["text"] for e in every[:-1])
    # The stream ended on the terminal event: reconnecting after it gives nothing more and ends at once.
    after_end = httpx.get(url, headers=A | {"Last-Event-ID": str(ids[-1])}, timeout=10)
    assert after_end.status_code == 200 and "event:" not in after_end.text
    pages = httpx.get(f"{follower.url}/jobs/{job_id}/pages", headers=A, params={"format": "text", "after": 2}).json()
    assert [p["page"] for p in pages["pages"]] == [3, 4] and pages["next_after"] is None
    assert pages["pages"][0]["text"].strip() == "Page number 3 of the report."


def test_tenant_b_cannot_follow_or_read_pages_of_as_job(apis, stack):
    a, b = stack.client(KEY_A), stack.client(KEY_B)
    job_id = a.post("/jobs", files={"file": ("x.pdf", text_pdf_bytes())}).json()["id"]
    batch = b.get("/batches", params={"limit": 1})
    assert batch.status_code == 200
    for path in (f"/jobs/{job_id}/events", f"/jobs/{job_id}/pages"):
        response = httpx.get(f"{apis[1].url}{path}", headers={"Authorization": f"Bearer {KEY_B}"}, timeout=10)
        assert (response.status_code, response.json()["code"]) == (404, "not_found"), (path, response.text)
    for bad_id in ("x", "99999999999999999999", "-1"):
        bad = httpx.get(f"{apis[1].url}/jobs/{job_id}/events", headers=A | {"Last-Event-ID": bad_id}, timeout=10)
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_event_id"), bad_id


def text_pdf_bytes() -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        return text_pdf(Path(tmp) / "x.pdf", ["Tenant A's page."], page_size=STRIP).read_bytes()
