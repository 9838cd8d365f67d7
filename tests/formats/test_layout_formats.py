"""hOCR, ALTO and PAGE from both engines' pages, checked by what others wrote: the official ALTO 4.4 and PAGE
2019 XSDs, hocr-tools' hocr-check, and hocr-tools' hocr-pdf read back by poppler (the round trip).

The vLLM engine is the real client against the OpenAI-compatible CPU stand-in (with logprobs), with its
layout on: pages turned upright, the answer laid onto rapidocr's detected lines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from common.formats import render_layout
from common.formats.structure import layout_of, page_confidence
from common.jobs.models import Job, Page
from tests.formats import pages as drawn
from tests.support.engine_server import MODEL
from tests.support.layout_checks import hocr_check, valid_alto, valid_page_zip
from tests.support.text import cer
from worker.engines.cpu import CpuEngine
from worker.engines.line_boxes import LineDetector, PageOrientation
from worker.engines.vllm import VllmEngine

DOCUMENTS = {"one column": [0], "two columns": [1], "turned": [2], "table": [3], "three pages": [0, 1, 3]}
ALTO = "{http://www.loc.gov/standards/alto/ns-v4#}"
PAGE = "{http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15}"


@pytest.fixture(scope="module")
def images():
    return [drawn.one_column(), drawn.two_columns(), drawn.one_column().rotate(90, expand=True), drawn.table()]


def _row(index: int, image, result) -> Page:
    """The page row as the worker writes it (worker/jobs/pipeline.py)."""
    confidence = result.confidence if result.confidence is not None else page_confidence(result.blocks)
    return Page(index=index, status="succeeded", text=result.text, width=image.width, height=image.height,
                engine=result.engine, rotation=result.rotation, blocks=result.blocks, confidence=confidence)


@pytest.fixture(scope="module")
def read(images, cpu_engine_server):
    cpu = CpuEngine()
    vllm = VllmEngine(urls=[cpu_engine_server.url], model=MODEL, layout=LineDetector(), orientation=PageOrientation())
    try:
        yield {"cpu": [_row(i, im, r) for i, (im, r) in enumerate(zip(images, cpu.read(images), strict=True))],
               "vllm": [_row(i, im, r) for i, (im, r) in enumerate(zip(images, vllm.read(images), strict=True))]}
    finally:
        cpu.close()
        vllm.close()


def _document(read, engine: str, name: str) -> tuple[Job, list[Page]]:
    rows = read[engine]
    pages = []
    for number, i in enumerate(DOCUMENTS[name]):
        row = rows[i]
        pages.append(Page(**{c: getattr(row, c) for c in ("status", "text", "width", "height", "engine", "rotation",
                                                          "blocks", "confidence")}, index=number))
    return Job(id=f"{engine}-{name}".replace(" ", "-"), filename=f"{name}.pdf"), pages


def _words(pages: list[Page]) -> list[str]:
    return [w["text"] for p in pages for b in layout_of(p).blocks for ln in b["lines"] for w in ln["words"]]


@pytest.mark.parametrize("engine", ["cpu", "vllm"])
@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_formats_are_valid_against_their_schemas(read, engine, name):
    job, pages = _document(read, engine, name)
    words = _words(pages)
    assert len(words) >= 10 and all(p.confidence for p in pages)

    hocr = render_layout("hocr", job, pages)
    # hocr-check compares lines across the whole file, pages included: overlap is checked page by page.
    hocr_check(hocr, overlap=len(pages) == 1)
    assert hocr.count(b'class="ocr_page"') == len(pages) and hocr.count(b"x_wconf") == len(words)

    alto = valid_alto(render_layout("alto", job, pages))
    assert [s.get("CONTENT") for s in alto.iter(f"{ALTO}String")] == words
    assert all(0 < float(s.get("WC")) <= 1 for s in alto.iter(f"{ALTO}String"))
    assert len(alto.findall(f".//{ALTO}Page")) == len(pages)
    refs = [r.get("REF") for r in alto.iter(f"{ALTO}ElementRef")]
    assert refs == [b.get("ID") for b in alto.iter(f"{ALTO}TextBlock")]  # the reading order is the blocks' order

    documents = valid_page_zip(render_layout("page", job, pages))
    assert len(documents) == len(pages)
    assert [w.find(f"{PAGE}TextEquiv/{PAGE}Unicode").text for d in documents for w in d.iter(f"{PAGE}Word")] == words
    for document in documents:
        regions = [r.get("id") for r in document.iter() if r.tag.endswith("Region") and r.get("id", "").count("_") == 1]
        assert [r.get("regionRef") for r in document.iter(f"{PAGE}RegionRefIndexed")] == regions


@pytest.mark.parametrize("engine", ["cpu", "vllm"])
def test_a_turned_page_is_read_upright_with_boxes_in_upright_pixels(read, images, engine):
    straight, turned = read[engine][0], read[engine][2]
    assert turned.rotation == 270 and straight.rotation == 0
    assert (layout_of(turned).width, layout_of(turned).height) == images[0].size
    first = [ln["box"] for b in layout_of(straight).blocks for ln in b["lines"]]
    second = [ln["box"] for b in layout_of(turned).blocks for ln in b["lines"]]
    assert len(first) == len(second)
    assert all(abs(a - b) <= 6 for one, two in zip(first, second, strict=True) for a, b in zip(one, two, strict=True))


@pytest.mark.parametrize(("engine", "index"), [("cpu", 0), ("vllm", 1)])
def test_hocr_round_trips_through_hocr_pdf(read, images, engine, index, tmp_path):
    """hocr-tools' hocr-pdf (which no one here wrote) makes a PDF of the page image and our hOCR; poppler reads
    back the words of our text layer."""
    job, [page] = Job(id="round-trip", filename="page.png"), [read[engine][index]]
    images[index].save(tmp_path / "page.jpg", dpi=(150, 150))
    (tmp_path / "page.hocr").write_bytes(render_layout("hocr", job, [page]))
    subprocess.run([str(Path(sys.executable).parent / "hocr-pdf"), str(tmp_path), "--savefile", str(tmp_path / "out.pdf")], check=True,
                   capture_output=True)
    back = subprocess.run(["pdftotext", "-raw", str(tmp_path / "out.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    ours = " ".join(_words([page]))
    assert cer(" ".join(back.split()), ours) <= 0.02
