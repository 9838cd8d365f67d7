"""POST /jobs through GET /jobs/{id}/result on Postgres, Redis, SeaweedFS and a real worker."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from common.jobs.models import Job
from tests.support.stack import wait_for_job
from tests.support.text import word_recall


def upload(client, name: str, data: bytes, **fields):
    return client.post("/jobs", files={"file": (name, data)}, data=fields)


def test_upload_png_is_read_by_the_worker(client, samples):
    response = upload(client, "linn.png", (samples / "linn.png").read_bytes(), metadata=json.dumps({"ref": 7}))
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "queued" and body["links"]["self"].endswith(body["id"])

    job = wait_for_job(client, body["id"])
    assert job["status"] == "succeeded", (job.get("error"), job.get("page_errors"))
    assert (job["pages_total"], job["pages_done"], job["pages_failed"]) == (1, 1, 0)
    assert job["metadata"] == {"ref": 7}
    assert job["started_at"] and job["finished_at"] >= job["started_at"]

    markdown = client.get(f"/jobs/{body['id']}/result").text
    assert markdown.startswith("<!-- ocrq:page 1 -->")
    assert "LinnSequencer" in markdown
    # linn.png has two columns whose lines the engine interleaves, so compare words, not order.
    assert word_recall((samples / "linn.txt").read_text(), markdown) > 0.9

    pages = client.get(f"/jobs/{body['id']}/result", params={"format": "json"}).json()["pages"]
    assert pages[0]["engine"] == "cpu" and pages[0]["model"].startswith("rapidocr")
    assert pages[0]["seconds"] > 0 and max(pages[0]["width"], pages[0]["height"]) == 1540
    # The CPU engine's boxes: blocks in reading order, each line with its box in the upright page.
    assert pages[0]["rotation"] == 0 and pages[0]["blocks"], pages[0]
    block = pages[0]["blocks"][0]
    assert set(block) == {"kind", "box", "lines", "confidence"}
    assert set(block["lines"][0]) == {"text", "box", "confidence", "words"}
    assert all(isinstance(v, int) for b in pages[0]["blocks"] for v in b["box"])
    text = client.get(f"/jobs/{body['id']}/result", params={"format": "text"})
    assert text.headers["content-type"].startswith("text/plain") and "LinnSequencer" in text.text


def test_jpeg_and_webp_uploads(client, samples):
    image = Image.open(samples / "typewriter.png").convert("RGB")
    ids = []
    for fmt in ("JPEG", "WEBP"):
        buffer = io.BytesIO()
        image.save(buffer, fmt, quality=90)
        response = upload(client, f"typewriter.{fmt.lower()}", buffer.getvalue())
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    for job_id in ids:
        assert wait_for_job(client, job_id)["status"] == "succeeded"
        assert len(client.get(f"/jobs/{job_id}/result", params={"format": "text"}).text.strip()) > 50


def test_unknown_id_is_404(client):
    assert client.get("/jobs/0123456789abcdef0123456789abcdef").status_code == 404
    assert client.get("/jobs/nope/result").status_code == 404
    assert client.delete("/jobs/nope").status_code == 404


def test_result_before_the_end_is_409(client, stack):
    with stack.services.db.session() as session:
        session.add(Job(id="f" * 32, tenant_id="tenant-a", source_kind="upload", source_uri="x", status="queued"))
    response = client.get(f"/jobs/{'f' * 32}/result")
    assert response.status_code == 409
    assert response.json()["status"] == "queued"


def test_another_tenants_job_is_404(client, other_client, samples):
    job_id = upload(client, "linn.png", (samples / "linn.png").read_bytes()).json()["id"]
    assert other_client.get(f"/jobs/{job_id}").status_code == 404
    assert other_client.get(f"/jobs/{job_id}/result").status_code == 404
    assert other_client.delete(f"/jobs/{job_id}").status_code == 404
    assert client.get(f"/jobs/{job_id}").status_code == 200


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer ocrq_wrong"}, {"Authorization": "Basic x"}])
def test_requests_without_a_valid_key_are_401(stack, headers):
    client = stack.client(None)
    assert client.get("/jobs/x", headers=headers).status_code == 401
    assert client.post("/jobs", headers=headers, json={"source_url": "http://example.com/a.png"}).status_code == 401
