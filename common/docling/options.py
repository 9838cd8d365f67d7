"""docling-serve's conversion options, mapped onto a job's: honoured, accepted at docling's default, or refused.

The options and their defaults are docling's ConvertDocumentsOptions (docling-slim 2.143,
docling/datamodel/service/options.py). Honoured: what to convert and answer (HONOURED). Accepted and without
effect: how docling would do it (IGNORED). Work ocrq does not do is accepted only at docling's default, which is
what leaving it out means; any other value answers 422 naming the option.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from common.errors import Rejected

# What the options say that ocrq does.
HONOURED = ("to_formats", "from_formats", "do_ocr", "force_ocr", "page_range", "md_page_break_placeholder",
            "ocr_lang")
TO_FORMATS = ("md", "json", "text")
# docling's InputFormat values ocrq reads, and the file names that are each; ALL_FROM_FORMATS is the whole enum
# (docling-slim 2.143, docling/datamodel/base_models.py InputFormat).
FROM_FORMATS = {"pdf": (".pdf",), "image": (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp", ".gif"),
                "docx": (".docx",), "xlsx": (".xlsx",), "pptx": (".pptx",), "odt": (".odt",), "ods": (".ods",),
                "odp": (".odp",), "rtf": (".rtf",), "html": (".html", ".htm"), "epub": (".epub",)}
ALL_FROM_FORMATS = ("docx", "doc", "rtf", "pptx", "ppt", "html", "mhtml", "image", "pdf", "asciidoc", "md", "csv",
                    "xlsx", "xls", "odt", "ods", "odp", "xml_uspto", "xml_jats", "xml_xbrl", "xml_doclang", "dclx",
                    "mets_gbs", "json_docling", "audio", "video", "vtt", "latex", "email", "epub", "boxnote",
                    "iwork_pages", "iwork_keynote", "iwork_numbers", "ebcdic", "afp")
# The languages the engines read (docs/engines/cpu.md), as the BCP-47 primary tags docling takes.
OCR_LANGS = frozenset({"zh", "en", "ja", "fr", "de", "es", "it", "nl", "pt", "sv", "da", "mul"})
# How docling would do the work (its engines, backends, models' modes, image handling, timeouts): ocrq does it
# its own way whatever these say, so any value is accepted and changes nothing (docs/api/docling.md).
IGNORED = ("image_export_mode", "ocr_engine", "ocr_preset", "pdf_backend", "table_mode", "table_cell_matching",
           "images_scale", "document_timeout", "include_images", "md_compact_tables",
           "picture_description_area_threshold")
# Work ocrq does not do, at docling's default (off, none, the standard pipeline): given so they change nothing;
# any other value answers 422 naming the option.
DEFAULTS: dict[str, Any] = {
    "pipeline": "standard", "abort_on_error": False, "do_table_structure": True, "do_pdf_heading_hierarchy": False,
    "include_page_images": False, "chunking_options": None, "chunking_preset": None, "do_code_enrichment": False,
    "do_formula_enrichment": False, "do_picture_classification": False, "do_chart_extraction": False,
    "do_picture_description": False, "picture_description_local": None, "picture_description_api": None,
    "vlm_pipeline_model": None, "vlm_pipeline_model_local": None, "vlm_pipeline_model_api": None,
    "vlm_pipeline_preset": None, "picture_description_preset": None, "code_formula_preset": None,
    "vlm_pipeline_custom_config": None, "picture_description_custom_config": None,
    "code_formula_custom_config": None, "table_structure_preset": None, "table_structure_custom_config": None,
    "layout_custom_config": None, "layout_preset": None, "picture_classification_preset": None,
    "picture_classification_custom_config": None, "chart_extraction_preset": None,
    "chart_extraction_custom_config": None, "pdf_heading_hierarchy_options": None, "ocr_custom_config": None,
}
OPEN_END = 10**9  # a page_range end at or past this (docling's default is sys.maxsize) means the last page


@dataclass(frozen=True)
class ConvertOptions:
    """What a docling request asks of ocrq: the job's options, and how to answer its result."""

    to_formats: tuple[str, ...] = ("md",)
    from_formats: tuple[str, ...] = ALL_FROM_FORMATS
    ocr: str = "auto"
    pages: str | None = None
    page_range: tuple[int, int] | None = None
    page_break: str = ""


def from_json(options: dict[str, Any]) -> ConvertOptions:
    """The `options` object of a JSON request."""
    return _checked(options)


def from_form(fields: list[tuple[str, str]]) -> ConvertOptions:
    """The form fields of a multipart request: repeated fields are lists, JSON values decoded where they parse."""
    values: dict[str, list[Any]] = {}
    for name, raw in fields:
        values.setdefault(name, []).append(_decoded(raw))
    options = {}
    for name, found in values.items():
        if name in ("to_formats", "from_formats", "ocr_lang", "page_range"):
            options[name] = [item for value in found for item in (value if isinstance(value, list) else [value])]
        else:
            options[name] = found[-1]
    return _checked(options)


def _decoded(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _refused(name: str, why: str) -> Rejected:
    return Rejected(422, f"option {name}: {why}", code="option_not_supported")


def _checked(options: dict[str, Any]) -> ConvertOptions:
    for name, value in options.items():
        if name in HONOURED or name in IGNORED:
            continue
        if name not in DEFAULTS:
            raise _refused(name, "is not an option of docling-serve's convert routes that ocrq knows")
        if value not in (DEFAULTS[name], None) and not (value in ([], {}) and DEFAULTS[name] is None):
            raise _refused(name, f"ocrq cannot honour {json.dumps(value)}; leave it out or give docling's "
                                 f"default {json.dumps(DEFAULTS[name])}")
    to_formats = tuple(_strings(options, "to_formats", default=["md"]))
    if unknown := [f for f in to_formats if f not in TO_FORMATS]:
        raise _refused("to_formats", f"ocrq answers md, json and text, not {', '.join(unknown)}")
    from_formats = tuple(_strings(options, "from_formats", default=list(ALL_FROM_FORMATS)))
    if unknown := [f for f in from_formats if f not in ALL_FROM_FORMATS]:
        raise _refused("from_formats", f"unknown formats {', '.join(unknown)}")
    langs = _strings(options, "ocr_lang", default=[])
    if unread := [tag for tag in langs if tag.split("-")[0].lower() not in OCR_LANGS]:
        raise _refused("ocr_lang", f"the engines do not read {', '.join(unread)}; they read "
                                   f"{', '.join(sorted(OCR_LANGS - {'mul'}))}")
    do_ocr, force_ocr = _flag(options, "do_ocr", True), _flag(options, "force_ocr", False)
    if force_ocr and not do_ocr:
        raise _refused("force_ocr", "cannot be true while do_ocr is false")
    placeholder = options.get("md_page_break_placeholder", "")
    if not isinstance(placeholder, str) or len(placeholder) > 256:
        raise _refused("md_page_break_placeholder", "must be a string of at most 256 characters")
    return ConvertOptions(to_formats=to_formats, from_formats=from_formats,
                          ocr="always" if force_ocr else "auto" if do_ocr else "never",
                          pages=_pages(options.get("page_range")), page_break=placeholder,
                          page_range=tuple(options["page_range"]) if options.get("page_range") else None)


def _strings(options: dict[str, Any], name: str, *, default: list[str]) -> list[str]:
    value = options.get(name, default)
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _refused(name, "must be a string or a list of strings")
    return value


def _flag(options: dict[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise _refused(name, "must be true or false")
    return value


def _pages(value: Any) -> str | None:
    """docling's [first, last] page_range as ocrq's page selection; its default range (1 to the end) is None."""
    if value is None:
        return None
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in value)):
        raise _refused("page_range", "must be two page numbers, [first, last]")
    first, last = value
    if first < 1 or last < first:
        raise _refused("page_range", "pages are numbered from 1 and the last may not come before the first")
    if last >= OPEN_END:
        return None if first == 1 else f"{first}-"
    return f"{first}-{last}"


def admits(options: ConvertOptions, filename: str | None) -> bool:
    """Whether the document's kind, told by its name, is among `from_formats` (a name without one is let in)."""
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if filename and "." in filename else ""
    kinds = [kind for kind, suffixes in FROM_FORMATS.items() if suffix in suffixes]
    return not kinds or any(kind in options.from_formats for kind in kinds)
