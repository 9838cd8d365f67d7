"""A PDF page's own text: its characters with their boxes, read by pdfium in the isolated child, and whether the
page can be read from them instead of by OCR.

A page's text is trusted only when it is real text that covers what the page shows:
- its characters map to Unicode (no private-use or replacement characters, no unmapped glyphs);
- it is drawn, not invisible (render mode 3 is another program's OCR layer: the page is OCR'd afresh);
- it is not white on white, and lies on the page, not clipped away;
- the page is not a scan with a few text objects (a stamped page number): pictures covering much of the page
  with little text on them send the page to OCR.
A trusted page's pictures of useful size are listed (`TextLayer.pictures`): their regions are OCR'd and merged
with the text (worker.engines.pictures), the page's source then `mixed`.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from .errors import DocumentRejected
from .isolation import run_isolated
from .limits import Limits
from .pdf import check_page_size, open_pdf, render_scale, rendered_size
from .text_lines import LINE_BREAK, SPACE, Glyph, group_lines


@dataclass(frozen=True)
class TrustRules:
    """When a page's text layer is read instead of the page being OCR'd; each threshold with its reason."""

    # Unmapped or private-use characters beyond this share: the font has no usable ToUnicode map.
    max_unmapped_share: float = 0.01
    # Characters drawn invisibly (render mode 3) beyond this share: an OCR layer someone else made.
    max_invisible_share: float = 0.05
    # Characters near-white (every channel at least this) beyond max_white_share: hidden text on white. White on
    # a dark fill or a picture (a table's header row, a slide's banner) is seen, and not counted.
    white_level: int = 235
    max_white_share: float = 0.05
    # Characters outside the page's box beyond this share: text clipped away from what is shown.
    max_outside_share: float = 0.05
    # Pictures covering at least this share of the page, with text covering less than text_over_pictures of
    # the pictures' area: a scan (its stamped page number or header is not the page's text).
    picture_share: float = 0.25
    text_over_pictures: float = 0.5
    # A page with fewer characters than this is read by OCR: nothing worth trusting (an empty or picture page).
    min_chars: int = 1
    # A picture smaller than this on either side, in rendered pixels, is a rule, an icon or a bullet: a line of
    # text needs about 16 px at 200 DPI, so nothing smaller is OCR'd.
    min_picture_side: int = 24


TRUST = TrustRules()

# Font names of fixed-pitch faces (a subset's "ABCDEF+" prefix aside): a run of them is a listing.
_FIXED_PITCH = re.compile(r"courier|mono|consol|menlo|typewriter|fixed|cmtt|cmsltt|cmitt|lmtt|sftt|tt\d", re.I)


def _bare(restype, function):
    """function through a prototype without argument types: ctypes then passes a handle, a byref and an int as
    they are, where pypdfium2's declared types convert each argument (the per-glyph calls took half a page's
    time). Every argument must be a ctypes object or an int that fits a C int."""
    return ctypes.CFUNCTYPE(restype)(ctypes.cast(function, ctypes.c_void_p).value)


_char_box = _bare(ctypes.c_int, pdfium_c.FPDFText_GetCharBox)
_loose_char_box = _bare(ctypes.c_int, pdfium_c.FPDFText_GetLooseCharBox)
_map_error = _bare(ctypes.c_int, pdfium_c.FPDFText_HasUnicodeMapError)
# The text object as a plain address: its identity for each glyph without a ctypes cast.
_text_object_address = _bare(ctypes.c_void_p, pdfium_c.FPDFText_GetTextObject)


@dataclass
class TextLayer:
    """A page's characters and the verdict on them."""

    width: int  # the rendered page's size in pixels, as render_page gives it
    height: int
    # A trusted page's lines, {"text", "box", "words"} in the rendered page's pixels (text_lines.group_lines).
    lines: list[dict] = field(default_factory=list)
    trusted: bool = False
    reason: str = ""  # why the page is OCR'd, or "trusted"
    counts: dict = field(default_factory=dict)
    # Pictures of useful size, x0, y0, x1, y1 in the rendered page's pixels, overlapping ones joined.
    pictures: list[tuple[int, int, int, int]] = field(default_factory=list)


def read_text_layer(path: Path, index: int, *, limits: Limits, rules: TrustRules = TRUST) -> TextLayer:
    """Page index of the PDF at path: its characters in pixels of the page as rendered, judged by rules."""
    return run_isolated(_read, Path(path), index, limits, rules, timeout_s=limits.render_timeout_s,
                        max_pixels=limits.max_page_pixels, what=f"reading the text of page {index + 1}")


# Pages read in one child by read_text_layers: each page's read took about 3 ms here, so a chunk stays far
# inside one page's render time limit.
CHUNK_PAGES = 100


def read_text_layers(path: Path, indices: list[int], *, limits: Limits, rules: TrustRules = TRUST) -> list[TextLayer]:
    """Several pages' text layers, CHUNK_PAGES to a child: one fork for many pages when a job is split."""
    layers: list[TextLayer] = []
    for start in range(0, len(indices), CHUNK_PAGES):
        chunk = indices[start:start + CHUNK_PAGES]
        layers += run_isolated(_read_many, Path(path), chunk, limits, rules, timeout_s=limits.render_timeout_s,
                               max_pixels=limits.max_page_pixels, what=f"reading the text of {len(chunk)} pages")
    return layers


def _read(path: Path, index: int, limits: Limits, rules: TrustRules) -> TextLayer:
    return _read_many(path, [index], limits, rules)[0]


def _read_many(path: Path, indices: list[int], limits: Limits, rules: TrustRules) -> list[TextLayer]:
    with open_pdf(path) as pdf:
        return [_read_page(pdf, index, limits, rules) for index in indices]


def _read_page(pdf: pdfium.PdfDocument, index: int, limits: Limits, rules: TrustRules) -> TextLayer:
    if not 0 <= index < len(pdf):
        raise DocumentRejected("page_out_of_range", f"Page {index + 1} does not exist; the PDF has {len(pdf)} pages.")
    check_page_size(*pdf.get_page_size(index), index=index)
    try:
        page = pdf[index]
    except pdfium.PdfiumError:
        raise DocumentRejected("invalid_pdf", f"Page {index + 1} of the PDF cannot be read.") from None
    try:
        return _judge(page, limits=limits, rules=rules)
    finally:
        page.close()


def _judge(page: pdfium.PdfPage, *, limits: Limits, rules: TrustRules) -> TextLayer:
    width_pt, height_pt = page.get_width(), page.get_height()
    scale = render_scale(width_pt, height_pt, longest_side=limits.longest_side)
    width, height = rendered_size(width_pt, height_pt, longest_side=limits.longest_side)
    layer = TextLayer(width=width, height=height)
    chars: list[Glyph | str] = []
    textpage = page.get_textpage()
    try:
        raw = textpage.raw
        handle = ctypes.c_void_p(ctypes.cast(raw, ctypes.c_void_p).value)
        count = pdfium_c.FPDFText_CountChars(raw)
        unmapped = invisible = white = outside = 0
        left, bottom, right, top = (ctypes.c_double() for _ in range(4))
        loose = pdfium_c.FS_RECTF()
        box_out = [ctypes.byref(v) for v in (left, right, bottom, top)]
        loose_out = ctypes.byref(loose)
        red, green, blue, alpha = (ctypes.c_uint() for _ in range(4))
        text = textpage.get_text_range(0, count) if count > 0 else ""
        if len(text) != count:
            # The range leaves out glyphs without a code point and spends two units on one beyond the BMP: every
            # later glyph's box would then be its neighbour's. One code point a glyph, asked glyph by glyph.
            text = [chr(pdfium_c.FPDFText_GetUnicode(raw, i)) for i in range(count)]
        # Render mode, colour and font are a text object's: looked up once for each object, not for each glyph.
        styles: dict[int, tuple[bool, bool, float, bool]] = {}
        flags, font_name = ctypes.c_int(), ctypes.create_string_buffer(128)
        grounds: list[tuple[float, float, float, float]] | None = None  # read for the first pale character
        for i, char in enumerate(text[:count]):
            if "\ud800" <= char <= "\udfff":
                # Asked glyph by glyph, a code point beyond the BMP comes as two UTF-16 halves, one an index: the
                # first half is read with the second's box; a half alone is no character.
                low = text[i + 1] if i + 1 < count else ""
                if char <= "\udbff" and "\udc00" <= low <= "\udfff":
                    continue
                high = text[i - 1] if i > 0 else ""
                if not (char >= "\udc00" and "\ud800" <= high <= "\udbff"):
                    unmapped += 1
                    continue
                char = (high + char).encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            # pdfium generates only spaces and line breaks, so only those are asked about.
            if char.isspace():
                chars.append(LINE_BREAK if char in "\r\n" else SPACE)
                continue
            if _map_error(handle, i) or char in "\ufffd\x00" or 0xE000 <= ord(char) <= 0xF8FF:
                unmapped += 1
                if char == "\x00":
                    continue
            if char in "\ufffe\x02":  # pdfium's mark for a hyphen that breaks a word at the line's end: printed "-"
                char = "-"
            key = _text_object_address(handle, i) or 0
            if (style := styles.get(key)) is None:
                text_object = pdfium_c.FPDFText_GetTextObject(raw, i)
                hidden = bool(text_object) and pdfium_c.FPDFTextObj_GetTextRenderMode(
                    text_object) == pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE
                pale = bool(pdfium_c.FPDFText_GetFillColor(raw, i, red, green, blue, alpha)) and alpha.value > 0 \
                    and min(red.value, green.value, blue.value) >= rules.white_level
                pdfium_c.FPDFText_GetFontInfo(raw, i, font_name, len(font_name), flags)
                # The FixedPitch flag, or the name: neither the standard Courier nor TeX's CMTT sets the flag.
                mono = bool(flags.value & 0x1) or bool(_FIXED_PITCH.search(font_name.value.decode("latin-1")))
                style = styles[key] = (hidden, pale, pdfium_c.FPDFText_GetFontSize(raw, i) * scale, mono)
            hidden, pale, size, mono = style
            invisible += hidden
            _char_box(handle, i, *box_out)
            x0, x1, y0, y1 = left.value, right.value, bottom.value, top.value
            if pale:
                grounds = _dark_grounds(page, rules.white_level) if grounds is None else grounds
                x, y = (x0 + x1) / 2, (y0 + y1) / 2
                white += not any(g[0] <= x <= g[2] and g[1] <= y <= g[3] for g in grounds)
            if x1 < 0 or x0 > width_pt or y1 < 0 or y0 > height_pt:
                outside += 1
                continue
            _loose_char_box(handle, i, loose_out)
            chars.append((char, max(x0, 0) * scale, max(height_pt - y1, 0) * scale, min(x1, width_pt) * scale,
                          min(height_pt - y0, height_pt) * scale, size, mono, loose.left * scale,
                          loose.right * scale, (height_pt - (loose.top + loose.bottom) / 2) * scale))
    finally:
        textpage.close()
    glyphs = [c for c in chars if c.__class__ is tuple]
    drawn = len(glyphs)
    bounds = _picture_bounds(page)
    pictures = _picture_area(bounds, width_pt, height_pt)
    text_area = sum((c[3] - c[1]) * (c[4] - c[2]) for c in glyphs)
    page_area = float(width * height)
    layer.counts = {"chars": drawn, "unmapped": unmapped, "invisible": invisible, "white": white, "outside": outside,
                    "picture_share": round(pictures, 3)}
    total = max(drawn + outside, 1)
    checks = [
        (drawn < rules.min_chars, "no text layer"),
        (unmapped > rules.max_unmapped_share * total, "characters without a Unicode mapping"),
        (invisible > rules.max_invisible_share * total, "an invisible text layer (another program's OCR)"),
        (white > rules.max_white_share * total, "white text on the page"),
        (outside > rules.max_outside_share * total, "text clipped off the page"),
        (pictures >= rules.picture_share and text_area < rules.text_over_pictures * pictures * page_area,
         "pictures that may hold text of their own (a scan)"),
    ]
    layer.reason = next((why for failed, why in checks if failed), "trusted")
    layer.trusted = layer.reason == "trusted"
    if layer.trusted:
        layer.lines = group_lines(chars)
        layer.pictures = _picture_boxes(bounds, width_pt, height_pt, scale, rules.min_picture_side)
        layer.counts["pictures"] = len(layer.pictures)
    return layer


def _dark_grounds(page: pdfium.PdfPage, white_level: int) -> list[tuple[float, float, float, float]]:
    """Bounds (points, y up) of what pale text can be seen on: pictures, and paths filled in a colour that is
    not near-white."""
    grounds = []
    red, green, blue, alpha = (ctypes.c_uint() for _ in range(4))
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=3):
        if obj.type == pdfium_c.FPDF_PAGEOBJ_PATH and not (
                pdfium_c.FPDFPath_GetDrawMode(obj.raw, fill, stroke) and fill.value
                and pdfium_c.FPDFPageObj_GetFillColor(obj.raw, red, green, blue, alpha) and alpha.value > 0
                and min(red.value, green.value, blue.value) < white_level):
            continue
        grounds.append(tuple(obj.get_bounds()))
    return grounds


def _picture_bounds(page: pdfium.PdfPage) -> list[tuple[float, float, float, float]]:
    """The page's image objects' bounds in points (y up), inside forms too."""
    return [tuple(obj.get_bounds()) for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=3)]


def _picture_boxes(bounds, width_pt: float, height_pt: float, scale: float, min_side: int
                   ) -> list[tuple[int, int, int, int]]:
    """Pictures as boxes in the rendered page's pixels (y down), clipped to the page, overlapping ones joined (a
    picture cut in tiles is read once), those under min_side on either side left out."""
    boxes = [[max(x0, 0) * scale, max(height_pt - y1, 0) * scale, min(x1, width_pt) * scale,
              min(height_pt - y0, height_pt) * scale] for x0, y0, x1, y1 in bounds]
    boxes = [b for b in boxes if b[2] > b[0] and b[3] > b[1]]
    joined = True
    while joined:
        joined = False
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    a[:] = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]
                    boxes.remove(b)
                    joined = True
                    break
            if joined:
                break
    return sorted((int(b[0]), int(b[1]), int(b[2] + 0.999), int(b[3] + 0.999)) for b in boxes
                  if b[2] - b[0] >= min_side and b[3] - b[1] >= min_side)


def _picture_area(bounds, width_pt: float, height_pt: float) -> float:
    """The share of the page that its pictures cover (their boxes' union, by a coarse grid)."""
    grid = 50
    covered = [[False] * grid for _ in range(grid)]
    for x0, y0, x1, y1 in bounds:
        for gx in range(max(int(x0 / width_pt * grid), 0), min(int(x1 / width_pt * grid + 0.999), grid)):
            for gy in range(max(int(y0 / height_pt * grid), 0), min(int(y1 / height_pt * grid + 0.999), grid)):
                covered[gx][gy] = True
    return sum(map(sum, covered)) / grid**2
