"""docling-serve's routes against docling-serve's own clients from PyPI, on the real stack (uvicorn, a worker,
Postgres, Redis, SeaweedFS): docling-client's DoclingServiceClient and AsyncDoclingServiceClient (the async routes,
poll, result, and the DoclingDocument they rebuild), and docling-serve-client's DoclingClient (the sync routes)."""

from __future__ import annotations

import asyncio
import base64
import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from docling.datamodel.service.options import ConvertDocumentsOptions
from docling.service_client import AsyncDoclingServiceClient, DoclingServiceClient
from docling.service_client.client import StatusWatcherKind
from docling.service_client.exceptions import ServiceError, TaskNotFoundError
from docling_core.types.doc.document import DoclingDocument
from docling_serve_sdk import DoclingClient
from docling_serve_sdk.models import ConvertDocumentsRequestOptions
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.conftest import KEY_A, KEY_B
from tests.formats.pages import one_column


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("docling") / "survey.png"
    one_column().save(path, "PNG")
    return path


@pytest.fixture(scope="module")
def page_server(page_file):
    """The page over HTTP on loopback (which the test settings' OCRQ_NET_ALLOWLIST lets the workers fetch)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(page_file.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_docling_client_converts_a_file_through_the_async_routes(api_url, page_file):
    """convert(): submit to /v1/convert/file/async (presigned_url first, then inbody when refused as docling-serve
    refuses it), the websocket refused so it polls, then /v1/result; the DoclingDocument rebuilt from json_content."""
    with DoclingServiceClient(url=api_url, api_key=KEY_A, poll_server_wait=2, job_timeout=120) as client:
        result = client.convert(source=page_file)
    assert result.status.value == "success"
    assert isinstance(result.document, DoclingDocument)
    markdown = result.document.export_to_markdown()
    assert "granite" in markdown
    assert result.document.pages[1].size.width > 0
    assert [item.prov[0].page_no for item in result.document.texts] == [1] * len(result.document.texts)


def test_docling_client_submits_a_url_and_polls(api_url, page_server):
    # Past the one page's end, which docling cuts at the last page; the worker finds the page count here.
    options = ConvertDocumentsOptions(to_formats=["md", "text"], page_range=(1, 4))
    with DoclingServiceClient(url=api_url, api_key=KEY_A, status_watcher=StatusWatcherKind.POLLING,
                              poll_server_wait=2, job_timeout=120) as client:
        result = client.convert(source=f"{page_server}/survey.png", options=options)
    assert result.status.value == "success" and "granite" in result.document.export_to_markdown()


def test_async_docling_client_submits_two_and_reads_both(api_url, page_file, page_server):
    async def main():
        async with AsyncDoclingServiceClient(url=api_url, api_key=KEY_A, poll_server_wait=2,
                                             job_timeout=120) as client:
            jobs = await asyncio.gather(client.submit(source=page_file),
                                        client.submit(source=f"{page_server}/survey.png"))
            return [job.task_id for job in jobs], await asyncio.gather(*(job.result(timeout=120) for job in jobs))

    task_ids, results = asyncio.run(main())
    assert len(set(task_ids)) == 2
    assert [r.status.value for r in results] == ["success", "success"]
    assert all("granite" in r.document.export_to_markdown() for r in results)


def test_convert_all_runs_many_through_the_async_client(api_url, page_file):
    with DoclingServiceClient(url=api_url, api_key=KEY_A, poll_server_wait=2, job_timeout=120) as client:
        results = list(client.convert_all(source=[page_file, page_file], max_concurrency=2))
    assert [r.status.value for r in results] == ["success", "success"]


def test_docling_serve_client_uses_the_sync_routes_with_its_own_defaults(api_url, page_file):
    """DoclingClient sends every option at its own defaults (easyocr, embedded images...): accepted, without
    effect; the sync answer carries md, text and json as asked, with the page-break placeholder."""
    options = ConvertDocumentsRequestOptions(to_formats=["md", "text", "json"],
                                             md_page_break_placeholder="<!-- page-break -->")
    with DoclingClient(api_url, api_key=KEY_A, timeout=120) as client:
        answer = client.convert_file(page_file, options=options)
        assert answer.status == "success" and answer.processing_time > 0
        document = answer.document
        assert "granite" in document.md_content and "granite" in document.text_content
        assert "<!--" not in document.text_content and "ocrq:page" not in document.md_content
        assert "granite" in DoclingDocument.model_validate(document.json_content).export_to_markdown()

        encoded = base64.b64encode(page_file.read_bytes()).decode()
        from_source = client.convert_source(_source_request({"kind": "file", "base64_string": encoded,
                                                             "filename": "survey.png"}))
        assert from_source.status == "success" and "granite" in from_source.document.md_content


def _source_request(source: dict):
    from docling_serve_sdk.models import ConvertDocumentsRequest

    return ConvertDocumentsRequest.model_validate({"sources": [source], "options": {"to_formats": ["md"]},
                                                   "target": {"kind": "inbody"}})


def test_options_ocrq_cannot_honour_answer_422_naming_them(api_url, page_file):
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=30)
    for fields, named in (({"to_formats": "html"}, "to_formats"), ({"do_picture_description": "true"},
                          "do_picture_description"), ({"pipeline": "vlm"}, "pipeline"),
                          ({"target_type": "zip"}, "target zip"), ({"page_range": ["3", "1"]}, "page_range")):
        answer = http.post("/v1/convert/file/async", data=fields,
                           files={"files": ("survey.png", page_file.read_bytes(), "image/png")})
        assert answer.status_code == 422, (fields, answer.text)
        assert named in answer.json()["detail"] and answer.json()["code"]
    answer = http.post("/v1/convert/source/async", json={"sources": [{"kind": "http", "url": "https://x.test/a.png"}],
                                                         "options": {"vlm_pipeline_model_api": {"url": "http://x"}}})
    assert answer.status_code == 422 and "vlm_pipeline_model_api" in answer.json()["detail"]


def test_the_ssrf_guard_refuses_loopback_and_metadata_sources(api_url):
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=30)
    for url in ("http://169.254.169.254/latest/meta-data/iam/", "http://[::1]:8000/jobs", "http://127.0.0.2/x.png",
                "http://0.0.0.0/x.png", "file:///etc/passwd"):
        for route in ("/v1/convert/source", "/v1/convert/source/async"):
            answer = http.post(route, json={"sources": [{"kind": "http", "url": url}]})
            assert answer.status_code == 422, (url, answer.text)
            assert answer.json()["code"] == "url_refused" and "sources[0].url refused" in answer.json()["detail"]


def test_another_tenants_task_is_not_found_and_shows_nothing(api_url, page_file):
    with DoclingServiceClient(url=api_url, api_key=KEY_A) as owner:
        task = owner.submit(source=page_file)
    mine = httpx.get(f"{api_url}/v1/status/poll/{task.task_id}", headers={"X-Api-Key": KEY_A}).json()
    assert mine["task_id"] == task.task_id
    unknown = "0" * 32
    for key_header in ({"X-Api-Key": KEY_B}, {"Authorization": f"Bearer {KEY_B}"},
                       {"X-Api-Key": KEY_B, "X-Tenant-Id": "tenant-a"}):
        for path in (f"/v1/status/poll/{task.task_id}?wait=1", f"/v1/result/{task.task_id}"):
            theirs = httpx.get(api_url + path, headers=key_header)
            made_up = httpx.get(api_url + path.replace(task.task_id, unknown), headers=key_header)
            assert theirs.status_code == made_up.status_code == 404
            assert theirs.json() == made_up.json() == {"code": "not_found", "detail": "Task not found."}
    for key_header in ({}, {"X-Api-Key": "ocrq_not_a_key"}):
        assert httpx.get(f"{api_url}/v1/result/{task.task_id}", headers=key_header).status_code == 401


def test_a_result_before_the_end_is_not_ready(api_url, page_file):
    with DoclingServiceClient(url=api_url, api_key=KEY_A) as client:
        task = client.submit(source=page_file)
        early = httpx.get(f"{api_url}/v1/result/{task.task_id}", headers={"X-Api-Key": KEY_A})
        if early.status_code == 404:  # not ended yet: the very sentence docling-serve's client reads as not ready
            assert early.json()["detail"] == "Task result not found. Please wait for a completion status."
        done = httpx.get(f"{api_url}/v1/status/poll/{task.task_id}?wait=30", headers={"X-Api-Key": KEY_A}).json()
    assert done["task_status"] == "success" and done["task_meta"]["num_succeeded"] == 1


def test_one_document_a_request(api_url, page_file):
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=30)
    two = [{"kind": "file", "base64_string": "aGk=", "filename": "a.png"}] * 2
    answer = http.post("/v1/convert/source/async", json={"sources": two})
    assert answer.status_code == 422 and answer.json()["code"] == "too_many_sources"
    png = page_file.read_bytes()
    answer = http.post("/v1/convert/file/async", files=[("files", ("a.png", png)), ("files", ("b.png", png))])
    assert answer.status_code == 422 and answer.json()["code"] == "too_many_sources"
    with pytest.raises(ServiceError):
        DoclingServiceClient(url=api_url, api_key="ocrq_wrong").submit(source=page_file)


def test_page_range_and_page_break_placeholder_are_honoured(api_url, samples):
    options = ConvertDocumentsRequestOptions(to_formats=["md", "json"], page_range=(2, 3),
                                             md_page_break_placeholder="<!-- page-break -->")
    with DoclingClient(api_url, api_key=KEY_A, timeout=120) as client:
        answer = client.convert_file(samples / "three-pages.pdf", options=options)
    markdown = answer.document.md_content
    assert answer.status == "success" and markdown.count("<!-- page-break -->") == 1
    assert "LinnSequencer" in markdown.split("<!-- page-break -->")[0]  # page 2 first
    document = DoclingDocument.model_validate(answer.document.json_content)
    assert sorted(document.pages) == [2, 3]


def test_a_page_range_past_the_end_ends_at_the_last_page_as_docling_does(api_url, samples):
    """docling keeps the pages of the range that the document has (base_pipeline, _get_expected_page_nos); a range
    that starts past the end fails docling's conversion, and ocrq refuses it before queueing."""
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=120)
    pdf = (samples / "three-pages.pdf").read_bytes()
    answer = http.post("/v1/convert/file", data={"page_range": ["3", "9"], "to_formats": ["json"]},
                       files={"files": ("three-pages.pdf", pdf, "application/pdf")})
    assert answer.status_code == 200 and answer.json()["status"] == "success", answer.text
    assert sorted(DoclingDocument.model_validate(answer.json()["document"]["json_content"]).pages) == [3]
    beyond = http.post("/v1/convert/file/async", data={"page_range": ["4", "9"]},
                       files={"files": ("three-pages.pdf", pdf, "application/pdf")})
    assert beyond.status_code == 422 and beyond.json()["code"] == "invalid_pages"
    assert "page 4 is beyond the end of the document, which has 3 pages" in beyond.json()["detail"]
    mine = http.post("/jobs", headers={"Authorization": f"Bearer {KEY_A}"}, data={"pages": "3-9"},
                     files={"file": ("three-pages.pdf", pdf, "application/pdf")})
    assert mine.status_code == 422 and mine.json()["code"] == "invalid_pages"  # ocrq's own pages= still refuses


def test_from_formats_that_exclude_the_document_are_refused(api_url, page_file):
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=30)
    answer = http.post("/v1/convert/file/async", data={"from_formats": ["pdf", "docx"]},
                       files={"files": ("survey.png", page_file.read_bytes(), "image/png")})
    assert answer.status_code == 422 and answer.json()["code"] == "format_excluded"


def test_an_erased_jobs_result_is_gone_and_says_so(api_url, page_file):
    http = httpx.Client(base_url=api_url, headers={"X-Api-Key": KEY_A}, timeout=60)
    task = http.post("/v1/convert/file/async", files={"files": ("survey.png", page_file.read_bytes())}).json()
    assert http.get(f"/v1/status/poll/{task['task_id']}", params={"wait": 30}).json()["task_status"] == "success"
    erased = http.post(f"/jobs/{task['task_id']}/erase", headers={"Authorization": f"Bearer {KEY_A}"})
    assert erased.status_code == 200
    gone = http.get(f"/v1/result/{task['task_id']}")
    assert gone.status_code == 404 and gone.json()["detail"].startswith("Task result not found")


def test_the_status_websocket_streams_to_the_end_and_keeps_tenants_apart(api_url, page_file):
    """docling's default watcher, with no fallback to polling: it must get its updates from the websocket."""
    with DoclingServiceClient(url=api_url, api_key=KEY_A, ws_fallback_to_poll=False, job_timeout=120) as owner:
        job = owner.submit(source=page_file)
        updates = [update.task_status for update in job.watch(timeout=120)]
        assert updates[-1] == "success" and "granite" in job.result().document.export_to_markdown()
    with DoclingServiceClient(url=api_url, api_key=KEY_B, ws_fallback_to_poll=False) as stranger:
        with pytest.raises(TaskNotFoundError):
            list(stranger._ws_watcher.iter_updates(task_id=job.task_id, timeout=10))
    with pytest.raises(InvalidStatus) as refused:  # closed before the handshake: refused, as docling-serve does
        connect(f"{api_url.replace('http', 'ws')}/v1/status/ws/{job.task_id}?api_key=ocrq_wrong")
    assert refused.value.response.status_code == 403
