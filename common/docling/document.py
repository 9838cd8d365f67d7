"""A job's pages as a DoclingDocument (docling-core's JSON, schema 1.x): what docling's clients rebuild a result from.

Written as plain JSON from the pages' blocks (common.formats.structure.layout_of): titles as section headers,
text, lists, tables with their cells, formulas; page headers and footers as furniture; each item with its page
and box (top-left origin, in the pixels of the upright page image, which is also the page's size).
"""

from __future__ import annotations

from typing import Any

from common.formats.structure import layout_of

# The DoclingDocument schema version written; docling-core reads any 1.x up to its own (1.10 in docling-core 2.104).
SCHEMA_VERSION = "1.10.0"
TEXT_LABELS = {"title": "section_header", "text": "text", "formula": "formula", "header": "page_header",
               "footer": "page_footer"}
FURNITURE = ("header", "footer")


def docling_document(name: str, pages: list) -> dict[str, Any]:
    """The DoclingDocument of `pages` (a job's Page rows), in document order."""
    doc = _Builder(name)
    for page in sorted(pages, key=lambda p: p.index):
        layout = layout_of(page)
        doc.pages[str(layout.number)] = {"size": {"width": float(layout.width), "height": float(layout.height)},
                                         "page_no": layout.number}
        doc.size = (float(layout.width), float(layout.height))
        for block in layout.blocks:
            doc.add_block(layout.number, block)
    return doc.document()


def _node(ref: str, *, layer: str = "body", **fields: Any) -> dict[str, Any]:
    return {"self_ref": ref, "children": [], "content_layer": layer, **fields}


class _Builder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.body = _node("#/body", name="_root_", label="unspecified")
        self.furniture = _node("#/furniture", layer="furniture", name="_root_", label="unspecified")
        self.texts: list[dict] = []
        self.groups: list[dict] = []
        self.tables: list[dict] = []
        self.pages: dict[str, dict] = {}
        self.size = (1.0, 1.0)  # the current page's, which boxes are kept inside

    def add_block(self, page_no: int, block: dict) -> None:
        kind = block.get("kind", "text")
        lines = [line for line in block.get("lines", []) if (line.get("text") or "").strip()]
        if kind == "figure":
            return  # its words describe a picture; no picture is exported
        if kind == "table" and block.get("rows"):
            self._table(page_no, block)
        elif kind == "list" and lines:
            group = _node(f"#/groups/{len(self.groups)}", parent={"$ref": "#/body"}, name="list", label="list")
            self.groups.append(group)
            self.body["children"].append({"$ref": group["self_ref"]})
            for line in lines:
                text = line["text"].strip().lstrip("-*•· ").strip() or line["text"].strip()
                self._text(page_no, "list_item", text, line.get("box") or block.get("box"), parent=group,
                           enumerated=False, marker="-")
        elif lines:
            label = TEXT_LABELS.get(kind, "text")
            parent = self.furniture if kind in FURNITURE else self.body
            extra = {"level": int(block.get("level") or 1)} if label == "section_header" else {}
            text = " ".join(line["text"].strip() for line in lines)
            self._text(page_no, label, text, block.get("box"), parent=parent, **extra)

    def _prov(self, page_no: int, box: Any, length: int) -> list[dict]:
        if not box or len(box) != 4:
            return []
        width, height = self.size
        left, right = (min(max(float(v), 0.0), width) for v in (box[0], box[2]))
        top, bottom = (min(max(float(v), 0.0), height) for v in (box[1], box[3]))
        return [{"page_no": page_no, "bbox": {"l": left, "t": top, "r": right, "b": bottom, "coord_origin": "TOPLEFT"},
                 "charspan": [0, length]}]

    def _text(self, page_no: int, label: str, text: str, box: Any, *, parent: dict, **extra: Any) -> None:
        ref = f"#/texts/{len(self.texts)}"
        layer = parent["content_layer"]
        self.texts.append(_node(ref, layer=layer, parent={"$ref": parent["self_ref"]}, label=label,
                                prov=self._prov(page_no, box, len(text)), orig=text, text=text, **extra))
        parent["children"].append({"$ref": ref})

    def _table(self, page_no: int, block: dict) -> None:
        rows = block["rows"]
        cells = []
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                text = cell.get("text", "") if isinstance(cell, dict) else str(cell or "")
                cells.append({"row_span": 1, "col_span": 1, "start_row_offset_idx": r, "end_row_offset_idx": r + 1,
                              "start_col_offset_idx": c, "end_col_offset_idx": c + 1, "text": text,
                              "column_header": r == 0, "row_header": False, "row_section": False})
        ref = f"#/tables/{len(self.tables)}"
        self.tables.append(_node(ref, parent={"$ref": "#/body"}, label="table",
                                 prov=self._prov(page_no, block.get("box"), 0), captions=[], references=[],
                                 footnotes=[], data={"table_cells": cells, "num_rows": len(rows),
                                                     "num_cols": max((len(row) for row in rows), default=0)}))
        self.body["children"].append({"$ref": ref})

    def document(self) -> dict[str, Any]:
        return {"schema_name": "DoclingDocument", "version": SCHEMA_VERSION, "name": self.name,
                "furniture": self.furniture, "body": self.body, "groups": self.groups, "texts": self.texts,
                "pictures": [], "tables": self.tables, "key_value_items": [], "form_items": [], "pages": self.pages}
