"""Document kinds, judged by content (magic bytes), never by name or Content-Type."""

from __future__ import annotations

from pathlib import Path

from .errors import DocumentRejected

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
    raise DocumentRejected(
        "unsupported_type",
        "The file's content is not a supported type; ocrq reads PDF, PNG, JPEG, WebP, BMP, GIF and TIFF.",
    )


def sniff_file(path: Path) -> str:
    """The document kind of the file at path, judged by its first bytes."""
    with open(path, "rb") as f:
        return sniff(f.read(SNIFF_BYTES))
