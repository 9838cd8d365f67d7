"""A page read from its own text whose pictures hold text of their own: the pictures' regions, and only they, go
to the engine, and what it reads joins the page's text in reading order (source `mixed`); a picture without text
adds nothing and the page stays `text_layer`."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

from common.documents.limits import Limits
from common.documents.text_layer import read_text_layer
from tests.conftest import KEY_A
from tests.documents import hostile
from tests.support.stack import wait_for_job

pytestmark = pytest.mark.timeout(300)

ABOVE = [f"Entry {i + 1} of the harbour ledger lists tides, ropes and cargo weights." for i in range(8)]
BELOW = "The ledger goes on below the picture with the winter dues."


def _prose_with_picture(path: Path, picture: Image.Image) -> Path:
    """Prose, a small picture (about 5 % of the page) under it, and a line below."""
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Times-Roman", 12)
    for i, line in enumerate(ABOVE):
        c.drawString(72, 780 - i * 16, line)
    width = 260
    c.drawImage(ImageReader(io.BytesIO(buffer.getvalue())), 72, 560, width=width,
                height=width * picture.height / picture.width)
    c.drawString(72, 520, BELOW)
    c.save()
    return path


def test_a_trusted_page_lists_its_pictures_of_useful_size(tmp_path):
    pdf = _prose_with_picture(tmp_path / "p.pdf", hostile.lettered("LIGHTHOUSE"))
    layer = read_text_layer(pdf, 0, limits=Limits())
    assert layer.trusted, layer.reason
    ((x0, y0, x1, y1),) = layer.pictures
    assert 0.03 < (x1 - x0) * (y1 - y0) / (layer.width * layer.height) < 0.08
    c = canvas.Canvas(str(tmp_path / "dot.pdf"), pagesize=A4)
    c.drawString(72, 780, "A bullet drawn as a tiny picture")
    c.drawImage(ImageReader(hostile.lettered("x", font_size=8)), 60, 778, width=6, height=6)
    c.save()
    assert read_text_layer(tmp_path / "dot.pdf", 0, limits=Limits()).pictures == []


def _submit(client, path: Path, **data) -> dict:
    response = client.post("/jobs", files={"file": (path.name, path.read_bytes())}, data=data)
    assert response.status_code == 202, response.text
    return wait_for_job(client, response.json()["id"], timeout=120)


def test_a_pictures_text_joins_the_page_and_only_the_picture_reaches_the_gpu_engine(gpu_stack, tmp_path):
    stack, server = gpu_stack
    client = stack.client(KEY_A)
    server.reset()
    job = _submit(client, _prose_with_picture(tmp_path / "p.pdf", hostile.lettered("LIGHTHOUSE KEEPER")))
    assert job["status"] == "succeeded", job
    (request,) = server.requests()  # the picture, not the page
    page = client.get(f"/jobs/{job['id']}/result", params={"format": "json"}).json()["pages"][0]
    width, height = request["image_size"]  # the region with its margin
    assert width * height < 0.2 * page["width"] * page["height"]
    assert page["source"] == "mixed"
    text = page["text"]
    positions = [text.find(piece) for piece in [ABOVE[0], ABOVE[-1], "LIGHTHOUSE KEEPER", BELOW]]
    assert -1 not in positions and positions == sorted(positions), text  # the picture's words in their place
    assert not text.lstrip().startswith("#") and "# LIGHTHOUSE" not in text  # lettering is not a heading
    lines = [line for block in page["blocks"] for line in block["lines"]]
    assert [line["text"] for line in lines if line.get("picture")] == ["LIGHTHOUSE KEEPER"]
    assert client.get(f"/jobs/{job['id']}/pages").json()["pages"][0]["source"] == "mixed"
    assert 'ocrq_pages_by_source_total{source="mixed"} 1.0' in stack.client(None).get("/metrics").text
    searchable = client.get(f"/jobs/{job['id']}/result", params={"format": "pdf"})
    (tmp_path / "searchable.pdf").write_bytes(searchable.content)
    found = subprocess.run(["pdftotext", str(tmp_path / "searchable.pdf"), "-"], capture_output=True, text=True,
                           check=True).stdout
    assert found.count("LIGHTHOUSE KEEPER") == 1 and found.count(BELOW) == 1  # the picture's words added once

    server.reset()
    never = _submit(client, tmp_path / "p.pdf", ocr="never")  # the text layer only: no engine at all
    assert never["status"] == "succeeded" and server.requests() == []
    page = client.get(f"/jobs/{never['id']}/result", params={"format": "json"}).json()["pages"][0]
    assert page["source"] == "text_layer" and "LIGHTHOUSE" not in page["text"]

    server.reset()
    blank = _submit(client, _prose_with_picture(tmp_path / "b.pdf", Image.new("RGB", (600, 150), "#6a8caf")))
    assert blank["status"] == "succeeded" and len(server.requests()) == 1  # asked, and it held nothing
    page = client.get(f"/jobs/{blank['id']}/result", params={"format": "json"}).json()["pages"][0]
    assert page["source"] == "text_layer"
    assert page["text"].split() == " ".join(ABOVE + [BELOW]).split()
