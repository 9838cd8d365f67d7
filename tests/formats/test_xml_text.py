"""hOCR, ALTO and PAGE stay well-formed and valid whatever characters a page's text holds: a model can emit a
control character, and a file's name or a page's error can carry one too."""

from __future__ import annotations

import pytest
from lxml import etree

from common.formats import render_layout
from common.formats.xml_text import legal
from common.jobs.models import Job, Page
from tests.support.layout_checks import hocr_check, valid_alto, valid_page_zip

FORBIDDEN = ([chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
             + ["\ud800", "\udbff", "\udc00", "\udfff", "\ufffe", "\uffff"])
KEPT = "é\U0001f600\ufffd\x7f"  # legal in XML 1.0, however odd


def _dirty(word: str) -> str:
    return "".join(FORBIDDEN) + word + KEPT


def _pages() -> list[Page]:
    """Three pages as the two engines store them: lines with words and their confidence (vLLM), lines with a
    score only (CPU), and text without blocks; and a failed page whose error holds the characters too."""
    vllm_line = {"text": _dirty("quay") + " oak", "box": [10, 10, 300, 40], "confidence": 0.9,
                 "words": [{"text": _dirty("quay"), "box": [10, 10, 150, 40], "confidence": 0.9},
                           {"text": "oak", "box": [160, 10, 300, 40], "confidence": 0.8}]}
    cpu_line = {"text": f"granite {_dirty('blocks')}", "box": [10, 60, 400, 90], "confidence": 0.7}
    return [
        Page(index=0, status="succeeded", width=600, height=400, rotation=0, engine="vllm", confidence=0.9,
             text=vllm_line["text"], blocks=[{"kind": "title", "box": [10, 10, 300, 40], "lines": [vllm_line]}]),
        Page(index=1, status="succeeded", width=600, height=400, rotation=0, engine="cpu", confidence=0.7,
             text=cpu_line["text"], blocks=[{"kind": "text", "box": [10, 60, 400, 90], "lines": [cpu_line]},
                                            {"kind": "table", "box": [10, 100, 400, 200], "lines": [cpu_line]}]),
        Page(index=2, status="succeeded", width=600, height=400, rotation=0, engine="cpu", confidence=None,
             text=f"# {_dirty('Harbour')}\n\nships {_dirty('tide')}", blocks=None),
        Page(index=3, status="failed", width=600, height=400, rotation=0, engine="cpu", error=_dirty("unreadable")),
    ]


def _texts(root: etree._Element) -> str:
    return "".join(root.itertext()) + "".join(v for e in root.iter() for v in e.attrib.values())


@pytest.mark.parametrize("fmt", ["hocr", "alto", "page"])
def test_every_forbidden_character_is_stripped_and_the_rest_kept(fmt):
    job = Job(id="dirty", filename=_dirty("scan") + ".pdf")
    document = render_layout(fmt, job, _pages())
    if fmt == "hocr":
        hocr_check(document, overlap=False)
        roots = [etree.fromstring(document)]
    elif fmt == "alto":
        roots = [valid_alto(document)]
    else:
        roots = valid_page_zip(document)
    text = "".join(_texts(root) for root in roots)
    for word in ("quay", "blocks", "Harbour", "tide"):
        assert word + KEPT in text
    assert not any(c in text for c in FORBIDDEN)
    if fmt != "page":
        assert "scan" + KEPT in text  # the file's name, in the head or the source image
    assert "unreadable" + KEPT in text


def test_legal_keeps_what_xml_allows():
    assert legal("a\tb\nc\rd" + KEPT) == "a\tb\nc\rd" + KEPT
    assert legal("".join(FORBIDDEN)) == ""


def test_plain_text_keeps_the_underscores_of_names_and_drops_only_emphasis():
    from common.formats.plain import markdown_to_text

    assert markdown_to_text("set max_num_seqs and gpu_memory_utilization") == \
        "set max_num_seqs and gpu_memory_utilization"
    assert markdown_to_text("**Bold**, __strong__, _em_ and *it*") == "Bold, strong, em and it"
    assert markdown_to_text("file_name.py and _private_") == "file_name.py and private"
    assert markdown_to_text(r"\*not em\* and `code_x`") == r"\*not em\* and code_x"
