"""The invisible text layer: lines with boxes drawn as render-mode-3 text by ocrmypdf's fpdf2 renderer.

ocrmypdf's renderer (MPL-2.0) is the field's reference for text layers: each word is placed on its box and
scaled to its width (Tz), and its fonts (NotoSans for Latin, the glyphless Occulta for every other BMP
character, CJK included) carry a ToUnicode map, so pdftotext and pdfium extract what was recognised.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from common.formats.placement import split_box

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class Line:
    text: str
    box: Box  # pixels of the upright image, origin top-left


@dataclass(frozen=True)
class PageLayer:
    """What one page of the job contributes to the PDF."""

    index: int  # 0-based page of the source document
    width: int | None = None  # the rendered image as the engine received it, before turning
    height: int | None = None
    rotation: int = 0  # degrees counter-clockwise the image was turned to read it upright
    lines: list[Line] = field(default_factory=list)
    error: str | None = None
    # Lines drawn even on a page with text of its own: a `mixed` page's pictures' lines, which its text lacks.
    beside_own_text: bool = False

    @property
    def upright_size(self) -> tuple[int, int]:
        return (self.height, self.width) if self.rotation in (90, 270) else (self.width, self.height)


def _words(line: Line):
    """The line's words, each with a share of the line's box proportional to its characters."""
    from ocrmypdf.hocrtransform import BoundingBox, OcrClass, OcrElement

    words = line.text.split()
    for word, (x0, y0, x1, y1) in zip(words, split_box(words, line.box), strict=True):
        yield OcrElement(ocr_class=OcrClass.WORD, bbox=BoundingBox(x0, y0, x1, y1), text=word)


def _page_tree(layer: PageLayer):
    from ocrmypdf.hocrtransform import BoundingBox, OcrClass, OcrElement

    width, height = layer.upright_size
    page = OcrElement(ocr_class=OcrClass.PAGE, bbox=BoundingBox(0, 0, width, height))
    for line in layer.lines:
        x0, y0, x1, y1 = line.box
        if not line.text.strip() or x1 <= x0 or y1 <= y0:
            continue
        box = BoundingBox(x0, y0, x1, y1)
        element = OcrElement(ocr_class=OcrClass.LINE, bbox=box, children=list(_words(line)))
        page.children.append(OcrElement(ocr_class=OcrClass.PARAGRAPH, bbox=box, children=[element]))
    return page


def render_text_pages(layers: list[PageLayer]) -> bytes:
    """A PDF with one text-only page per layer, each one upright-image pixel to the point (72 dpi)."""
    from ocrmypdf.font import MultiFontManager
    from ocrmypdf.font.font_provider import BuiltinFontProvider
    from ocrmypdf.fpdf_renderer import Fpdf2MultiPageRenderer

    # The bundled fonts only: the system search is slow and would make the output depend on the host.
    fonts = MultiFontManager(font_provider=BuiltinFontProvider())
    pages = [(n, _page_tree(layer), 72.0) for n, layer in enumerate(layers)]
    # Its warning that a script has no visible font is expected: the layer is invisible by design.
    logging.getLogger("ocrmypdf.font.multi_font_manager").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="ocrq-layer-") as tmp:
        path = Path(tmp) / "layer.pdf"
        Fpdf2MultiPageRenderer(pages_data=pages, multi_font_manager=fonts, invisible_text=True).render(path)
        return path.read_bytes()
