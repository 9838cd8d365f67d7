"""The searchable PDF: the source's own pages (PDF pages imported, images embedded) with the text layer on top."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
from PIL import ImageOps

from common.documents import DocumentRejected, images
from common.documents.isolation import run_isolated
from common.documents.kinds import sniff_file
from common.documents.limits import Limits

from .text_layer import PageLayer, render_text_pages

PRODUCER = "ocrq searchable PDF (text layer: ocrmypdf fpdf2 renderer)"


def build_pdf(source: Path, layers: list[PageLayer], *, limits: Limits, title: str | None = None) -> bytes:
    """The searchable PDF of the job's pages.

    The text layer is drawn here (it holds only our own text); the source is untrusted, so reading it and
    putting the pages together runs in a child process.
    """
    layers = sorted(layers, key=lambda layer: layer.index)
    drawn = [n for n, layer in enumerate(layers) if layer.lines and not layer.error]
    text = render_text_pages([layers[n] for n in drawn]) if drawn else None
    return run_isolated(_build, Path(source), layers, drawn, text, limits, title,
                        timeout_s=limits.render_timeout_s + 0.5 * len(layers),
                        max_pixels=limits.max_page_pixels, what="building the PDF")


def _build(source: Path, layers: list[PageLayer], drawn: list[int], text: bytes | None, limits: Limits,
           title: str | None) -> bytes:
    try:
        return _assemble(source, layers, drawn, text, limits, title)
    except pikepdf.PdfError as exc:  # its messages name the file on disk: say what happened, not where
        raise DocumentRejected("invalid_pdf", "The source PDF could not be read to build the searchable PDF.") from exc


def _assemble(source: Path, layers: list[PageLayer], drawn: list[int], text: bytes | None, limits: Limits,
              title: str | None) -> bytes:
    kind = sniff_file(source)
    with _source_pages(source, kind, limits, [layer.index for layer in layers]) as base:
        vector = _pages_with_text(source, kind, [layer.index for layer in layers])
        out = pikepdf.new()
        for n, layer in enumerate(layers):
            out.pages.append(base.pages[layer.index if kind == "pdf" else n])
        text_pdf = pikepdf.open(io.BytesIO(text)) if text else None
        for k, n in enumerate(drawn):
            if layers[n].index not in vector or layers[n].beside_own_text:
                _graft(out, out.pages[n], text_pdf.pages[k], layers[n])
        _describe(out, layers, title=title)
        buffer = io.BytesIO()
        out.save(buffer, deterministic_id=True)
        return buffer.getvalue()


def _source_pages(source: Path, kind: str, limits: Limits, indices: list[int]) -> pikepdf.Pdf:
    """The source's pages as a PDF: itself for a PDF, one page per selected image frame otherwise."""
    if kind == "pdf":
        return pikepdf.open(source)
    import img2pdf

    frames = []
    with images.open_image(source, kind) as image:
        for index in indices:
            image.seek(index)
            images.check_pixels(image, index=index, limits=limits)
            frame = images.to_rgb(ImageOps.exif_transpose(image))
            encoded = io.BytesIO()
            if kind == "jpeg" and frame.mode == "RGB":
                frame.save(encoded, "JPEG", quality=92)
            else:
                frame.save(encoded, "PNG")
            dpi = image.info.get("dpi")
            frames.append((encoded.getvalue(), dpi))
    pdf = pikepdf.new()
    for data, dpi in frames:
        base = img2pdf.get_fixed_dpi_layout_fun(tuple(round(float(d)) for d in dpi)) if _usable(dpi) else None
        page = pikepdf.open(io.BytesIO(img2pdf.convert(data, layout_fun=_any_size(base or img2pdf.default_layout_fun),
                                                       allow_oversized=True)))
        pdf.pages.append(page.pages[0])
    return pdf


def _any_size(base):
    """img2pdf's layout made valid at any size: PDF pages lie between 3 and 14,400 units a side.

    img2pdf puts a page over 14,400 points on a /UserUnit (a power of ten) and divides its size by it; a
    side under 3 units after that (a 1-pixel image, a long thin strip) is raised to 3, stretching the image
    on that side only, so every page that was read gets its PDF.
    """
    import img2pdf

    def layout(width_px, height_px, dpi):
        width, height, _, _ = base(width_px, height_px, dpi)
        unit = img2pdf.find_scale(width, height) if max(width, height) > 14400 else 1
        width, height = max(width, 3.0 * unit), max(height, 3.0 * unit)
        return width, height, width, height

    return layout


def _usable(dpi) -> bool:
    try:
        return all(36 <= float(d) <= 2400 for d in dpi)
    except (TypeError, ValueError):
        return False


def _pages_with_text(source: Path, kind: str, indices: list[int]) -> set[int]:
    """Pages that already carry text objects: they keep their own text, and get no second layer."""
    if kind != "pdf":
        return set()
    with_text = set()
    doc = pdfium.PdfDocument(source)
    try:
        for index in indices:
            page = doc[index]
            textpage = page.get_textpage()
            if textpage.count_chars() > 0 and textpage.get_text_range().strip():
                with_text.add(index)
            textpage.close()
            page.close()
    finally:
        doc.close()
    return with_text


def _graft(out: pikepdf.Pdf, page: pikepdf.Page, text_page: pikepdf.Page, layer: PageLayer) -> None:
    """Draw the text page over the page, mapped from the upright image's frame onto the page as shown."""
    form = out.copy_foreign(text_page.as_form_xobject())
    name = page.add_resource(form, pikepdf.Name.XObject, prefix="OcrqText")
    matrix = _text_to_page(page, layer)
    page.contents_add(b"q\n", prepend=True)
    page.contents_add(b"Q\nq\n" + pikepdf.unparse_content_stream(
        [([*matrix.shorthand], pikepdf.Operator("cm")), ([name], pikepdf.Operator("Do"))]) + b"\nQ\n")


def _text_to_page(page: pikepdf.Page, layer: PageLayer) -> pikepdf.Matrix:
    """The affine map from the text page (upright pixels as points, y up) to the page's user space."""
    width, height = layer.width, layer.height
    upright_h = layer.upright_size[1]
    llx, lly, urx, ury = (float(v) for v in page.cropbox)
    rotate = int(page.obj.get("/Rotate", 0)) % 360

    def to_page(s: float, t: float) -> tuple[float, float]:
        u, v = s, upright_h - t
        # Back from the upright image to the rendered one (the engine turned it counter-clockwise).
        x, y = {0: (u, v), 90: (width - v, u), 180: (width - u, height - v), 270: (v, height - u)}[layer.rotation]
        fx, fy = x / width, y / height
        # The rendered image is the page as shown, i.e. after its /Rotate (clockwise).
        px, py = {0: (fx, 1 - fy), 90: (fy, fx), 180: (1 - fx, fy), 270: (1 - fy, 1 - fx)}[rotate]
        return llx + px * (urx - llx), lly + py * (ury - lly)

    (e, f), (ax, ay), (cx, cy) = to_page(0, 0), to_page(1, 0), to_page(0, 1)
    return pikepdf.Matrix(ax - e, ay - f, cx - e, cy - f, e, f)


def _describe(out: pikepdf.Pdf, layers: list[PageLayer], *, title: str | None) -> None:
    """Document metadata: the producer and, for each page that could not be read, its reason."""
    failed = {str(layer.index + 1): layer.error for layer in layers if layer.error}
    out.docinfo[pikepdf.Name.Producer] = PRODUCER
    out.docinfo[pikepdf.Name.Creator] = "ocrq"
    if title:
        out.docinfo[pikepdf.Name.Title] = title
    if failed:
        out.docinfo[pikepdf.Name("/OcrqFailedPages")] = json.dumps(failed, ensure_ascii=False)
        out.docinfo[pikepdf.Name.Subject] = "; ".join(f"page {n} failed: {reason}" for n, reason in failed.items())
