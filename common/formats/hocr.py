"""hOCR 1.2 (kba.github.io/hocr-spec/1.2): XHTML with ocr_page > ocr_carea > ocr_par > ocr_line > ocrx_word,
each with its bbox in the upright page's pixels, words with x_wconf (0-100). A table block is an ocr_table (the
spec's element for a table; it has none for cells, whose rows and columns are in the JSON, PAGE XML and CSV)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from common.formats.structure import PageLayout
from common.formats.xml_text import scrub

XHTML = "http://www.w3.org/1999/xhtml"
DOCTYPE = ('<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
           '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n')
CAPABILITIES = "ocr_page ocr_carea ocr_table ocr_par ocr_line ocrx_word ocrp_wconf ocr_photo"


def _bbox(box) -> str:
    return "bbox {} {} {} {}".format(*(int(v) for v in box))


def _conf(value: float | None) -> str:
    return f"; x_wconf {round(value * 100)}" if value is not None else ""


def render(job, pages: list[PageLayout]) -> bytes:
    """The job's pages as one hOCR document."""
    html = ET.Element("html", {"xmlns": XHTML, "xml:lang": "en", "lang": "en"})
    head = ET.SubElement(html, "head")
    ET.SubElement(head, "title").text = job.filename or job.id
    ET.SubElement(head, "meta", {"http-equiv": "Content-Type", "content": "text/html;charset=utf-8"})
    ET.SubElement(head, "meta", {"name": "ocr-system", "content": "ocrq"})
    ET.SubElement(head, "meta", {"name": "ocr-capabilities", "content": CAPABILITIES})
    ET.SubElement(head, "meta", {"name": "ocr-number-of-pages", "content": str(len(pages))})
    body = ET.SubElement(html, "body")
    for page in pages:
        _page(body, page)
    ET.indent(scrub(html), space=" ")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + DOCTYPE.encode() + ET.tostring(html, encoding="utf-8",
                                                                                        xml_declaration=False)


def _page(body: ET.Element, page: PageLayout) -> None:
    n = page.number
    title = f"{_bbox((0, 0, page.width, page.height))}; ppageno {n - 1}"
    div = ET.SubElement(body, "div", {"class": "ocr_page", "id": f"page_{n}", "title": title})
    if page.error:
        div.set("data-error", page.error)
    words = 0
    for b, block in enumerate(page.blocks, start=1):
        if block["kind"] == "figure":
            ET.SubElement(div, "div", {"class": "ocr_photo", "id": f"photo_{n}_{b}", "title": _bbox(block["box"])})
            continue
        area = ET.SubElement(div, "div", {"class": "ocr_table" if block["kind"] == "table" else "ocr_carea",
                                          "id": f"block_{n}_{b}", "title": _bbox(block["box"]),
                                          "data-kind": block["kind"]})
        par = ET.SubElement(area, "p", {"class": "ocr_par", "id": f"par_{n}_{b}", "title": _bbox(block["box"])})
        for ln, line in enumerate(block["lines"], start=1):
            span = ET.SubElement(par, "span", {"class": "ocr_line", "id": f"line_{n}_{b}_{ln}",
                                               "title": _bbox(line["box"])})
            for w, word in enumerate(line["words"]):
                words += 1
                item = ET.SubElement(span, "span", {"class": "ocrx_word", "id": f"word_{n}_{words}",
                                                    "title": _bbox(word["box"]) + _conf(word["confidence"])})
                item.text = word["text"]
                if w < len(line["words"]) - 1:
                    item.tail = " "
