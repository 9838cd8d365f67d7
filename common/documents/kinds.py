"""Document kinds, judged by content (magic bytes), never by name or Content-Type."""

from __future__ import annotations

from pathlib import Path

from .errors import DocumentRejected
from .office import MIME_TYPES as OFFICE_MIME_TYPES
from .office import head_kind, package_kind

# A PDF header may follow up to 1024 bytes of junk, which readers (pdfium included) skip.
SNIFF_BYTES = 1024

MIME_TYPES = {
    "pdf": "application/pdf",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "gif": "image/gif",
    "tiff": "image/tiff",
    **OFFICE_MIME_TYPES,
}

_PREFIXES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),
)
# Sizes of the BMP info headers Pillow reads; "BM" alone is too weak a signature.
_BMP_HEADER_SIZES = {12, 16, 40, 52, 56, 64, 108, 124}


def sniff(head: bytes) -> str:
    """The document kind of a file from its first SNIFF_BYTES bytes."""
    if not head:
        raise DocumentRejected("empty_file", "The file is empty.")
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:2] == b"BM" and int.from_bytes(head[14:18], "little") in _BMP_HEADER_SIZES:
        return "bmp"
    if b"%PDF-" in head[:SNIFF_BYTES]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "zip"  # an office package or not: sniff_file looks inside
    if kind := head_kind(head):
        return kind
    raise DocumentRejected(
        "unsupported_type",
        "The file's content is not a supported type; ocrq reads PDF, PNG, JPEG, WebP, BMP, GIF, TIFF, DOCX, XLSX, "
        "PPTX, ODT, ODS, ODP, EPUB, RTF and HTML.",
    )


def sniff_file(path: Path) -> str:
    """The document kind of the file at path, judged by its first bytes."""
    with open(path, "rb") as f:
        kind = sniff(f.read(SNIFF_BYTES))
    return package_kind(path) if kind == "zip" else kind
