"""ALTO v4 (Library of Congress, alto-4-4.xsd): one Page per document page, TextBlock > TextLine > String with
WC (word confidence, 0-1), blocks tagged with their kind, and a ReadingOrder of the blocks page by page."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from common.formats.structure import PageLayout
from common.formats.xml_text import scrub

NS = "http://www.loc.gov/standards/alto/ns-v4#"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = f"{NS} http://www.loc.gov/alto/v4/alto-4-4.xsd"
KINDS = ("title", "header", "footer", "text", "list", "table", "formula", "figure")


def _geometry(box) -> dict[str, str]:
    x0, y0, x1, y1 = (int(v) for v in box)
    return {"HPOS": str(x0), "VPOS": str(y0), "WIDTH": str(max(x1 - x0, 0)), "HEIGHT": str(max(y1 - y0, 0))}


def _wc(value: float | None) -> dict[str, str]:
    return {} if value is None else {"WC": f"{min(max(value, 0.0), 1.0):.4f}"}


def render(job, pages: list[PageLayout]) -> bytes:
    """The job's pages as one ALTO document."""
    ET.register_namespace("", NS)
    ET.register_namespace("xsi", XSI)
    alto = ET.Element(f"{{{NS}}}alto", {f"{{{XSI}}}schemaLocation": SCHEMA})
    description = ET.SubElement(alto, f"{{{NS}}}Description")
    ET.SubElement(description, f"{{{NS}}}MeasurementUnit").text = "pixel"
    source = ET.SubElement(description, f"{{{NS}}}sourceImageInformation")
    ET.SubElement(source, f"{{{NS}}}fileName").text = job.filename or job.id
    processing = ET.SubElement(description, f"{{{NS}}}Processing", {"ID": "ocrq"})
    software = ET.SubElement(processing, f"{{{NS}}}processingSoftware")
    ET.SubElement(software, f"{{{NS}}}softwareName").text = "ocrq"
    tags = ET.SubElement(alto, f"{{{NS}}}Tags")
    for kind in KINDS:
        ET.SubElement(tags, f"{{{NS}}}LayoutTag", {"ID": f"kind_{kind}", "LABEL": kind})
    order = ET.SubElement(alto, f"{{{NS}}}ReadingOrder")
    layout = ET.SubElement(alto, f"{{{NS}}}Layout")
    for page in pages:
        _page(layout, order, page)
    if not len(order):
        alto.remove(order)  # a ReadingOrder must hold a group, and no page was read
    ET.indent(scrub(alto), space=" ")
    return ET.tostring(alto, encoding="utf-8", xml_declaration=True)


def _page(layout: ET.Element, order: ET.Element, page: PageLayout) -> None:
    n = page.number
    attrs = {"ID": f"page_{n}", "PHYSICAL_IMG_NR": str(n), "WIDTH": str(page.width), "HEIGHT": str(page.height)}
    if page.confidence is not None:
        attrs["PC"] = f"{page.confidence:.4f}"
    if page.error:
        attrs |= {"QUALITY": "Missing", "QUALITY_DETAIL": page.error}
    element = ET.SubElement(layout, f"{{{NS}}}Page", attrs)
    blocks = [b for b in page.blocks if b["kind"] == "figure" or b["lines"]]
    if not blocks:
        return
    space = ET.SubElement(element, f"{{{NS}}}PrintSpace", _geometry((0, 0, page.width, page.height)))
    group = ET.SubElement(order, f"{{{NS}}}OrderedGroup", {"ID": f"order_{n}"})
    for b, block in enumerate(blocks, start=1):
        block_id = f"block_{n}_{b}"
        ET.SubElement(group, f"{{{NS}}}ElementRef", {"ID": f"order_{n}_{b}", "REF": block_id})
        attrs = {"ID": block_id, **_geometry(block["box"]), "TAGREFS": f"kind_{block['kind']}"}
        if block["kind"] == "figure":
            ET.SubElement(space, f"{{{NS}}}Illustration", attrs)
            continue
        text_block = ET.SubElement(space, f"{{{NS}}}TextBlock", attrs)
        for ln, line in enumerate(block["lines"], start=1):
            text_line = ET.SubElement(text_block, f"{{{NS}}}TextLine", {"ID": f"line_{n}_{b}_{ln}",
                                                                         **_geometry(line["box"])})
            for w, word in enumerate(line["words"], start=1):
                if w > 1:
                    ET.SubElement(text_line, f"{{{NS}}}SP")
                ET.SubElement(text_line, f"{{{NS}}}String", {"ID": f"word_{n}_{b}_{ln}_{w}", "CONTENT": word["text"],
                                                             **_geometry(word["box"]), **_wc(word["confidence"])})
