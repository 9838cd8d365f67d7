"""PAGE XML 2019 (PRImA, pagecontent 2019-07-15): one PcGts per page, so a job's pages come as a zip of
page-0001.xml, page-0002.xml, …; regions with Coords, TextLine and Word with TextEquiv@conf (0-1), and the
regions' ReadingOrder."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zipfile
from datetime import UTC, datetime

from common.formats.structure import PageLayout
from common.formats.tables import from_block
from common.formats.xml_text import scrub

NS = "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = f"{NS} {NS}/pagecontent.xsd"
TEXT_TYPES = {"title": "heading", "header": "header", "footer": "footer", "formula": "other"}


def render(job, pages: list[PageLayout]) -> bytes:
    """The job's pages as a zip of PAGE XML files, one a page, named by page number."""
    buffer = io.BytesIO()
    created = (job.finished_at or job.created_at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for page in pages:
            archive.writestr(f"page-{page.number:04d}.xml", page_document(page, created=created, name=job.filename))
    return buffer.getvalue()


def _q(tag: str) -> str:
    return f"{{{NS}}}{tag}"


def _coords(parent: ET.Element, box) -> None:
    x0, y0, x1, y1 = (max(int(v), 0) for v in box)
    ET.SubElement(parent, _q("Coords"), {"points": f"{x0},{y0} {x1},{y0} {x1},{y1} {x0},{y1}"})


def _equiv(parent: ET.Element, text: str, confidence: float | None) -> None:
    attrs = {} if confidence is None else {"conf": f"{min(max(confidence, 0.0), 1.0):.4f}"}
    ET.SubElement(ET.SubElement(parent, _q("TextEquiv"), attrs), _q("Unicode")).text = text


def page_document(page: PageLayout, *, created: str, name: str | None) -> bytes:
    """One page as a PcGts document."""
    ET.register_namespace("", NS)
    ET.register_namespace("xsi", XSI)
    root = ET.Element(_q("PcGts"), {f"{{{XSI}}}schemaLocation": SCHEMA, "pcGtsId": f"page_{page.number}"})
    metadata = ET.SubElement(root, _q("Metadata"))
    ET.SubElement(metadata, _q("Creator")).text = "ocrq"
    ET.SubElement(metadata, _q("Created")).text = created
    ET.SubElement(metadata, _q("LastChange")).text = created
    attrs = {"imageFilename": f"{name or 'page'}#page={page.number}", "imageWidth": str(page.width),
             "imageHeight": str(page.height)}
    if page.error:
        attrs["custom"] = f"error {{reason:{page.error}}}"
    element = ET.SubElement(root, _q("Page"), attrs)
    blocks = [b for b in page.blocks if b["kind"] == "figure" or b["lines"]]
    if blocks:
        group = ET.SubElement(ET.SubElement(element, _q("ReadingOrder")), _q("OrderedGroup"), {"id": f"order_{page.number}"})
        for b in range(1, len(blocks) + 1):
            ET.SubElement(group, _q("RegionRefIndexed"), {"index": str(b - 1), "regionRef": f"r{page.number}_{b}"})
    for b, block in enumerate(blocks, start=1):
        region_id = f"r{page.number}_{b}"
        if block["kind"] == "figure":
            _coords(ET.SubElement(element, _q("ImageRegion"), {"id": region_id}), block["box"])
            continue
        if block["kind"] == "table":
            _table_region(element, block, region_id)
        else:
            _text_region(element, block, region_id, TEXT_TYPES.get(block["kind"], "paragraph"))
    ET.indent(scrub(root), space=" ")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _table_region(parent: ET.Element, block: dict, region_id: str) -> None:
    """A TableRegion with a TextRegion a cell (its TableCellRole: row, column, spans, header) holding the lines
    inside the cell; the block's lines in one TextRegion where they do not fall into cells in reading order."""
    table = from_block(block)
    attrs = {"rows": str(table.rows), "columns": str(table.columns)} if table else {}
    region = ET.SubElement(parent, _q("TableRegion"), {"id": region_id} | attrs)
    _coords(region, block["box"])
    owners = _cells_of_lines(table, block["lines"]) if table else None
    if owners is None:
        _text_region(region, block, f"{region_id}_text", "paragraph")
        return
    for n, cell in enumerate(table.cells, start=1):
        lines = [line for line, owner in zip(block["lines"], owners, strict=True) if owner == n - 1]
        role = {"rowIndex": str(cell.row), "columnIndex": str(cell.col), "rowSpan": str(cell.row_span),
                "colSpan": str(cell.col_span), "header": "true" if cell.header else "false"}
        _text_region(region, {"box": cell.box or block["box"], "lines": lines, "confidence": cell.confidence},
                     f"{region_id}_c{n}", "paragraph", role=role, text=cell.text)


def _cells_of_lines(table, lines: list[dict]) -> list[int] | None:
    """Which cell each line's middle falls in, or None where one falls in none or the cells' order would reorder
    the lines (each word must stay once and in reading order)."""
    owners = []
    for line in lines:
        x, y = (line["box"][0] + line["box"][2]) / 2, (line["box"][1] + line["box"][3]) / 2
        inside = [n for n, c in enumerate(table.cells) if c.box and c.box[0] <= x <= c.box[2] and c.box[1] <= y <= c.box[3]]
        if not inside or (owners and inside[0] < owners[-1]):
            return None
        owners.append(inside[0])
    return owners


def _text_region(parent: ET.Element, block: dict, region_id: str, kind: str, *, role: dict | None = None,
                 text: str | None = None) -> None:
    region = ET.SubElement(parent, _q("TextRegion"), {"id": region_id, "type": kind})
    _coords(region, block["box"])
    if role:
        ET.SubElement(ET.SubElement(region, _q("Roles")), _q("TableCellRole"), role)
    for ln, line in enumerate(block["lines"], start=1):
        text_line = ET.SubElement(region, _q("TextLine"), {"id": f"{region_id}_l{ln}"})
        _coords(text_line, line["box"])
        for w, word in enumerate(line["words"], start=1):
            item = ET.SubElement(text_line, _q("Word"), {"id": f"{region_id}_l{ln}_w{w}"})
            _coords(item, word["box"])
            _equiv(item, word["text"], word["confidence"])
        _equiv(text_line, line["text"], line.get("confidence"))
    _equiv(region, text if text is not None else "\n".join(line["text"] for line in block["lines"]),
           block.get("confidence"))
