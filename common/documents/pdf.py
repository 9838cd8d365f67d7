"""PDF checks and rasterisation with pypdfium2.

Page policy: a page is rendered so that its longest side is limits.longest_side pixels, which
bounds the bitmap whatever the page size, except that small pages are not enlarged past
MAX_RENDER_DPI. Pages are refused when rendering them that way cannot give a readable image:
a side longer than MAX_PAGE_SIDE_PT (larger than 4A0, the largest paper size; at 1540 px it
would be below 15 DPI), sides differing by more than MAX_ASPECT_RATIO times, a side under
MIN_PAGE_SIDE_PT, or embedded images totalling more than limits.max_page_pixels (decoding them
is the decompression bomb, whatever the output size).

Encrypted PDFs that open without a password (an owner password only) are rendered like any
other; those that need a user password are refused as encrypted_pdf.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from .errors import DocumentRejected
from .isolation import RawPixels
from .limits import Limits

MAX_PAGE_SIDE_PT = 100 * 72
MIN_PAGE_SIDE_PT = 1.0
MAX_ASPECT_RATIO = 100
MAX_RENDER_DPI = 600
# Pages whose embedded images are checked at submit; every page is checked again before rendering.
SUBMIT_IMAGE_SCAN_PAGES = 25

_CM_PER_PT = 2.54 / 72


@contextmanager
def open_pdf(path: Path) -> Iterator[pdfium.PdfDocument]:
    """The open document, closed on exit; load failures become DocumentRejected."""
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as error:
        raise _load_error(path, error) from None
    try:
        yield pdf
    finally:
        pdf.close()


def _load_error(path: Path, error: pdfium.PdfiumError) -> DocumentRejected:
    if error.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
        return DocumentRejected(
            "encrypted_pdf", "The PDF is encrypted and needs a password to open; send it decrypted."
        )
    # pdfium refuses a document without pages as a format error; tell that case apart.
    if _has_empty_page_tree(path):
        return DocumentRejected("empty_pdf", "The PDF has no pages.")
    return DocumentRejected("invalid_pdf", "The file starts like a PDF but cannot be read as one.")


_PAGES_DICT = re.compile(rb"<<(?:(?!<<|>>).)*?/Type\s*/Pages\b(?:(?!<<|>>).)*?>>", re.DOTALL)
_COUNT = re.compile(rb"/Count\s+(\d+)")


def _has_empty_page_tree(path: Path, *, max_bytes: int = 16 << 20) -> bool:
    with open(path, "rb") as f:
        data = f.read(max_bytes)
    counts = [int(m[1]) for d in _PAGES_DICT.finditer(data) for m in _COUNT.finditer(d[0])]
    return bool(counts) and not any(counts)


def check_document(pdf: pdfium.PdfDocument, *, limits: Limits) -> int:
    """The page count, after the checks cheap enough for submit time."""
    count = len(pdf)
    if count == 0:
        raise DocumentRejected("empty_pdf", "The PDF has no pages.")
    if count > limits.max_pages:
        raise DocumentRejected(
            "too_many_pages", f"The PDF has {count} pages; at most {limits.max_pages} are accepted per job."
        )
    for index in range(count):
        check_page_size(*pdf.get_page_size(index), index=index)
    for index in range(min(count, SUBMIT_IMAGE_SCAN_PAGES)):
        page = pdf[index]
        try:
            check_page_images(page, index=index, limits=limits)
        finally:
            page.close()
    return count


def check_page_size(width_pt: float, height_pt: float, *, index: int) -> None:
    """Refuse a page whose size in points cannot render to a readable image."""
    size = f"{width_pt * _CM_PER_PT:.1f} × {height_pt * _CM_PER_PT:.1f} cm"
    longest, shortest = max(width_pt, height_pt), min(width_pt, height_pt)
    if not math.isfinite(longest) or longest > MAX_PAGE_SIDE_PT:
        raise DocumentRejected(
            "page_too_large",
            f"Page {index + 1} is {size}; pages up to {MAX_PAGE_SIDE_PT * _CM_PER_PT:.0f} cm "
            f"({MAX_PAGE_SIDE_PT // 72} in) a side are accepted.",
        )
    if shortest < MIN_PAGE_SIDE_PT:
        raise DocumentRejected("page_too_small", f"Page {index + 1} is {size}, too small to hold anything.")
    if longest / shortest > MAX_ASPECT_RATIO:
        raise DocumentRejected(
            "page_aspect_ratio",
            f"Page {index + 1} is {size}: its sides differ more than {MAX_ASPECT_RATIO} times, "
            "so no rendering of it would be readable.",
        )


def check_page_images(page: pdfium.PdfPage, *, index: int, limits: Limits) -> None:
    """Refuse a page whose embedded images declare more pixels than limits.max_page_pixels."""
    pixels = 0
    largest = (0, 0)
    for image in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,)):
        width, height = image.get_px_size()
        pixels += width * height
        largest = max(largest, (width, height), key=lambda s: s[0] * s[1])
        if pixels > limits.max_page_pixels:
            raise DocumentRejected(
                "decompression_bomb",
                f"Page {index + 1} embeds images of {pixels:,} pixels or more (the largest "
                f"{largest[0]:,} × {largest[1]:,}); at most {limits.max_page_pixels:,} are accepted per page.",
            )


def render_scale(width_pt: float, height_pt: float, *, longest_side: int) -> float:
    """Pixels per point giving longest_side pixels on the longest side, at most MAX_RENDER_DPI."""
    # pypdfium2 sizes the bitmap with ceil(side * scale); stay a hair under to avoid an extra pixel.
    fit = (longest_side - 1e-6) / max(width_pt, height_pt)
    return min(fit, MAX_RENDER_DPI / 72)


def rendered_size(width_pt: float, height_pt: float, *, longest_side: int) -> tuple[int, int]:
    """The pixel size render_pdf_page gives a page of this size in points."""
    scale = render_scale(width_pt, height_pt, longest_side=longest_side)
    return math.ceil(width_pt * scale), math.ceil(height_pt * scale)


def render_pdf_page(
    path: Path, index: int, *, limits: Limits, shared: mmap.mmap | None = None
) -> Image.Image | RawPixels:
    """Page index of the PDF at path in RGB, after its size and image checks.

    With a shared buffer large enough, pdfium draws straight into it and RawPixels describes them.
    """
    with open_pdf(path) as pdf:
        count = len(pdf)
        if not 0 <= index < count:
            raise DocumentRejected("page_out_of_range", f"Page {index + 1} does not exist; the PDF has {count} pages.")
        check_page_size(*pdf.get_page_size(index), index=index)
        pdf.init_forms()  # so filled-in form fields are drawn; must precede loading the page
        try:
            page = pdf[index]
        except pdfium.PdfiumError:
            raise DocumentRejected("invalid_pdf", f"Page {index + 1} of the PDF cannot be read.") from None
        try:
            check_page_images(page, index=index, limits=limits)
            width, height = rendered_size(page.get_width(), page.get_height(), longest_side=limits.longest_side)
            stride = 3 * width
            if shared is not None and stride * height <= len(shared):
                _draw(pdf, page, shared, width, height)
                return RawPixels("RGB", (width, height), "RGB", stride)
            pixels = bytearray(stride * height)
            _draw(pdf, page, pixels, width, height)
            return Image.frombytes("RGB", (width, height), pixels, "raw", "RGB", stride)
        finally:
            page.close()


def _draw(
    pdf: pdfium.PdfDocument, page: pdfium.PdfPage, buffer: mmap.mmap | bytearray, width: int, height: int
) -> None:
    # pdfium's C API, so that pixels land in the caller's buffer rather than in copies of it.
    stride = 3 * width
    memory = (ctypes.c_ubyte * (stride * height)).from_buffer(buffer)
    bitmap = pdfium_c.FPDFBitmap_CreateEx(width, height, pdfium_c.FPDFBitmap_BGR, memory, stride)
    if not bitmap:
        raise MemoryError("pdfium could not create the page bitmap")
    try:
        pdfium_c.FPDFBitmap_FillRect(bitmap, 0, 0, width, height, 0xFFFFFFFF)
        flags = pdfium_c.FPDF_ANNOT | pdfium_c.FPDF_REVERSE_BYTE_ORDER  # RGB order, annotations drawn
        pdfium_c.FPDF_RenderPageBitmap(bitmap, page, 0, 0, width, height, 0, flags)
        if pdf.formenv:
            pdfium_c.FPDF_FFLDraw(pdf.formenv, bitmap, page, 0, 0, width, height, 0, flags)
    finally:
        pdfium_c.FPDFBitmap_Destroy(bitmap)
        del memory
