"""Open WebUI's external document loader contract on the real stack.

What the loader sends and reads is taken from its source, open-webui/open-webui
backend/open_webui/retrieval/loaders/external_document.py (ExternalDocumentLoader.load; the same in the
open-webui 0.12.4 wheel): `requests.put(f"{url}/process", data=<the file's bytes>, headers={"Content-Type": mime,
"Authorization": f"Bearer {api_key}", "X-Filename": quote(os.path.basename(file_path))})`; on `response.ok` it
reads `response.json()`, a dict or a list of dicts, into `Document(page_content=d.get("page_content"),
metadata=d.get("metadata"))` (langchain_core.documents); a 422 whose detail says "No extractable text" makes Open
WebUI fall back to its own parsing. The requests below are those, and the answers are read into LangChain's own
Document as the loader does. open-webui itself (torch and more, 7.4 GB) is too heavy for the suite:
bench/openwebui_loader.py runs its real loader class, here too when OCRQ_OPEN_WEBUI_PYTHON names a Python that has
it.
"""

from __future__ import annotations

import json
import os
import subprocess
from urllib.parse import quote

import pytest
import requests
from langchain_core.documents import Document
from PIL import Image

from tests.conftest import KEY_A, KEY_B
from tests.formats.pages import one_column
from tests.support.stack import ROOT


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("owui") / "1f0c_survey scan.png"  # Open WebUI names uploads <id>_<name>
    one_column().save(path, "PNG")
    return path


def load(url: str, key: str | None, path, mime: str | None = "image/png") -> list[Document]:
    """What ExternalDocumentLoader.load does with the answer, step for step."""
    headers = {}
    if mime is not None:
        headers["Content-Type"] = mime
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    headers["X-Filename"] = quote(os.path.basename(path))
    response = requests.put(f"{url.rstrip('/')}/process", data=path.read_bytes(), headers=headers, timeout=120)
    if not response.ok:
        raise LoadError(response.status_code, response.json())
    data = response.json()
    items = [data] if isinstance(data, dict) else data
    return [Document(page_content=item.get("page_content"), metadata=item.get("metadata")) for item in items]


class LoadError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        super().__init__(status, body)
        self.status, self.body = status, body


def test_a_page_comes_back_as_langchain_documents(api_url, page_file):
    docs = load(api_url, KEY_A, page_file)
    assert len(docs) == 1 and "granite" in docs[0].page_content
    meta = docs[0].metadata
    assert meta["source"] == "1f0c_survey scan.png" and (meta["page"], meta["page_label"]) == (0, "1")
    assert meta["total_pages"] == 1 and meta["ocrq_job_id"]
    json.dumps(meta)  # plain JSON: Open WebUI stores it with the chunks


def test_a_pdf_gives_one_document_a_page(api_url, samples):
    docs = load(api_url, KEY_A, samples / "three-pages.pdf", mime="application/pdf")
    assert [d.metadata["page"] for d in docs] == [0, 1, 2]
    assert "LinnSequencer" in docs[1].page_content


def test_a_blank_page_says_no_extractable_text(api_url, tmp_path):
    blank = tmp_path / "blank.png"
    Image.new("RGB", (600, 800), "white").save(blank)
    with pytest.raises(LoadError) as refused:
        load(api_url, KEY_A, blank)
    assert refused.value.status == 422 and "No extractable text" in refused.value.body["detail"]


def test_the_job_it_makes_is_the_callers_own_on_every_route(api_url, page_file):
    """The hostile tenant's side: the job behind an answer of /process is not found by another key on any route that
    reads jobs (ocrq's, docling's), nor in its listing."""
    job_id = load(api_url, KEY_A, page_file)[0].metadata["ocrq_job_id"]
    stranger = {"Authorization": f"Bearer {KEY_B}"}
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/result", f"/jobs/{job_id}/pages", f"/jobs/{job_id}/events",
                 f"/v1/status/poll/{job_id}", f"/v1/result/{job_id}"):
        answer = requests.get(api_url + path, headers=stranger, timeout=30)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found", (path, answer.text)
    assert requests.post(f"{api_url}/jobs/{job_id}/erase", headers=stranger, timeout=30).status_code == 404
    listed = requests.get(f"{api_url}/jobs", headers=stranger, params={"limit": 200}, timeout=30).json()["jobs"]
    assert job_id not in [job["id"] for job in listed]
    mine = requests.get(f"{api_url}/jobs/{job_id}", headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30)
    assert mine.json()["status"] == "succeeded" and mine.json()["metadata"] == {"via": "open-webui"}


def test_without_a_good_key_it_is_401(api_url, page_file):
    for key in (None, "ocrq_not_a_key"):
        with pytest.raises(LoadError) as refused:
            load(api_url, key, page_file)
        assert refused.value.status == 401


def test_a_file_name_with_a_path_in_it_keeps_only_the_name(api_url, page_file, tmp_path):
    odd = tmp_path / "x.png"
    odd.write_bytes(page_file.read_bytes())
    response = requests.put(f"{api_url}/process", data=odd.read_bytes(), timeout=120,
                            headers={"Authorization": f"Bearer {KEY_A}", "X-Filename": quote("../../etc/passwd")})
    assert response.ok and response.json()[0]["metadata"]["source"] == "passwd"


def test_a_file_that_is_not_a_document_is_refused_with_a_sentence(api_url, tmp_path):
    junk = tmp_path / "notes.bin"
    junk.write_bytes(b"\x00\x01 not a document")
    with pytest.raises(LoadError) as refused:
        load(api_url, KEY_A, junk, mime=None)
    body = refused.value.body
    assert refused.value.status == 415 and body["code"] and "Traceback" not in body["detail"]


def test_open_webuis_own_loader_class(api_url, page_file):
    python = os.environ.get("OCRQ_OPEN_WEBUI_PYTHON")
    if not python:
        pytest.skip("OCRQ_OPEN_WEBUI_PYTHON names no Python with open-webui installed (bench/openwebui_loader.py)")
    done = subprocess.run([python, str(ROOT / "bench" / "openwebui_loader.py"), "--url", api_url, "--key", KEY_A,
                           str(page_file)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["documents"] == 1 and "granite" in line["page_content"][0], line
    assert line["metadata"][0]["page_label"] == "1"
