"""Searchable PDF results through the whole service.

The vLLM path runs with the project's CPU engine server standing in for vLLM, so the text comes from one
engine (over the OpenAI API) and the line boxes from another (rapidocr's detector in the worker).
"""

from __future__ import annotations

import io

import httpx
import pytest
from sqlalchemy import select

from common.jobs.models import Page
from common.formats.plain import markdown_to_text
from tests.conftest import KEY_A, make_settings
from tests.support.engine_server import MODEL
from tests.support.pdf_checks import draw_page, page_sizes, pdfium_texts, poppler_text, poppler_words, qpdf_check
from tests.support.stack import Stack, wait_for_job
from tests.support.text import cer

BODY = ["The invoice is due within thirty days.", "La facture est payable à réception.",
        "Die Rechnung ist binnen vierzehn Tagen fällig.", "Fakturaen forfalder inden for tredive dage."]


@pytest.fixture(scope="module")
def gpu_stack(tmp_path_factory, pg_url, redis_url, s3, cpu_engine_server):
    home = tmp_path_factory.mktemp("pdf-gpu")
    # The layout off: the detector runs for PDF jobs alone (with it on, pages carry blocks, which the PDF uses
    # as the CPU engine's: tests/formats/test_confidence.py).
    settings = make_settings(home=home / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[cpu_engine_server.url], engine_model=MODEL, engine_pair_size=1,
                             engine_layout=False)
    with Stack(settings, logs=home) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        yield stack


def _submit(client, page, output: str) -> str:
    image = io.BytesIO()
    page.image.save(image, "PNG", dpi=(144, 144))
    response = client.post("/jobs", files={"file": ("letter.png", image.getvalue())}, data={"output": output})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"], timeout=180)
    assert job["status"] == "succeeded", job
    return job["id"]


def _result(client, job_id: str, fmt: str) -> httpx.Response:
    response = client.get(f"/jobs/{job_id}/result", params={"format": fmt}, follow_redirects=False)
    if response.status_code == 303:  # stored in S3: a presigned link, as for large text results
        response = httpx.get(response.headers["location"])
    assert response.status_code == 200, response.text[:200]
    return response


def _pdf(client, job_id: str, tmp_path) -> tuple:
    response = _result(client, job_id, "pdf")
    assert response.content.startswith(b"%PDF-")
    path = tmp_path / f"{job_id}.pdf"
    path.write_bytes(response.content)
    qpdf_check(path)
    return path, markdown_to_text(_result(client, job_id, "json").json()["pages"][0]["text"])


def test_vllm_text_is_placed_on_the_detectors_lines(gpu_stack, tmp_path):
    client = gpu_stack.client(KEY_A)
    page = draw_page("Quarterly Report", [BODY])
    job_id = _submit(client, page, "pdf")
    path, json_text = _pdf(client, job_id, tmp_path)

    assert page_sizes(path) == [(595.0, 770.0)]
    for extracted in (poppler_text(path), pdfium_texts(path)[0]):
        assert cer(page.truth, extracted) <= 0.05, extracted
        assert cer(json_text, extracted) <= 0.05, extracted
    # The title's words sit on the title's printed line (144 dpi: half a point per pixel).
    x0, y0, x1, y1 = (v * 0.5 for v in page.title_box)
    words = [w for w in poppler_words(path) if w.text in ("Quarterly", "Report")]
    assert len(words) == 2
    for w in words:
        assert w.box[0] >= x0 - 4 and w.box[2] <= x1 + 4 and w.box[1] >= y0 - 8 and w.box[3] <= y1 + 8, (w, page)
    with gpu_stack.services.db.session() as session:
        [row] = session.scalars(select(Page).where(Page.job_id == job_id))
    assert row.engine == "vllm" and row.text_layer["boxes"] >= 5 and row.text_layer["seconds"] > 0


def test_the_detector_runs_only_for_pdf_jobs_and_any_job_can_still_have_a_pdf(gpu_stack, tmp_path):
    client = gpu_stack.client(KEY_A)
    page = draw_page("Delivery Note", [BODY[:2]])
    job_id = _submit(client, page, "markdown")
    with gpu_stack.services.db.session() as session:
        [row] = session.scalars(select(Page).where(Page.job_id == job_id))
    assert row.text_layer is None
    # Built on demand: the text as a page-level block, searchable but without the words' positions.
    path, json_text = _pdf(client, job_id, tmp_path)
    assert cer(json_text, poppler_text(path)) <= 0.05 and cer(page.truth, pdfium_texts(path)[0]) <= 0.05


def test_cpu_engine_pdf_of_a_pdf_source_keeps_its_pages_and_its_vector_text(client, tmp_path):
    import pikepdf

    from tests.documents.hostile import pdf_of, text_pdf

    scans = [draw_page("Scanned Cover", [BODY]), draw_page("Second Scan", [BODY[::-1]])]
    pdf_of([scans[0].image], tmp_path / "a.pdf", dpi=140)
    text_pdf(tmp_path / "vector.pdf", ["Terms and conditions apply to every order placed."])
    pdf_of([scans[1].image], tmp_path / "c.pdf", dpi=200)
    source = pikepdf.new()
    for name in ("a", "vector", "c"):
        source.pages.extend(pikepdf.open(tmp_path / f"{name}.pdf").pages)
    source.save(tmp_path / "source.pdf")
    body = (tmp_path / "source.pdf").read_bytes()
    response = client.post("/jobs", files={"file": ("three.pdf", body)}, data={"output": "pdf"})
    job = wait_for_job(client, response.json()["id"], timeout=240)
    assert job["status"] == "succeeded", job
    path = tmp_path / "out.pdf"
    path.write_bytes(_result(client, job["id"], "pdf").content)
    qpdf_check(path)

    assert page_sizes(path) == page_sizes(tmp_path / "source.pdf")
    pages = _result(client, job["id"], "json").json()["pages"]
    for n in (1, 2, 3):
        read = markdown_to_text(pages[n - 1]["text"])
        assert cer(read, poppler_text(path, n)) <= 0.05 and cer(read, pdfium_texts(path)[n - 1]) <= 0.05
    for n in (1, 3):
        assert cer(scans[n // 2].truth, poppler_text(path, n)) <= 0.05, poppler_text(path, n)
    with pikepdf.open(tmp_path / "source.pdf") as before, pikepdf.open(path) as after:
        assert after.pages[1].Contents.read_bytes() == before.pages[1].Contents.read_bytes()
