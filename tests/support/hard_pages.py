"""Pages of layouts bench/cpu_corpus.py never makes (issue 56), each built to break one reading-order rule.

Drawn in Liberation fonts (the corpus draws DejaVu) at 150 DPI; `truth` is the text in a reader's order.
"""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from tests.documents.hostile import _wrap as wrap
from tests.support.pages import LaidOutPage

SANS = "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"
SANS_BOLD = "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf"
SERIF = "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"

TEXT = [
    ("Members of the cooperative meet on the first Monday of each month in the hall behind the mill. Minutes "
     "are read aloud, accounts are passed around the table, and any member may raise a question about the "
     "price paid for grain."),
    ("The mill was rebuilt in stone after the fire, with a wider wheel and a second pair of grindstones. Its "
     "output doubled within two seasons, and farmers from the valley beyond the ridge began to bring their "
     "harvest here instead of to the town."),
    ("A small library occupies the room above the office. It lends almanacs, manuals on drainage and "
     "the care of orchards, and a few novels donated by the widow of the first secretary, who kept the "
     "catalogue in her own hand."),
    ("Disputes over water rights are settled by a committee of three, chosen by lot each spring. Their "
     "decisions are written in a ledger kept at the mill, and no decision has been appealed to the county "
     "court in forty years."),
]

FIELDS = [
    ("Name of the applicant", "Margaret Ellison Hale"),
    ("Place and date of birth", "Upper Brookfield, on the fourteenth of February"),
    ("Postal address in full", "27 Orchard Lane, Upper Brookfield, near the old mill on the river road"),
    ("Kind of membership", "a full member since the spring meeting, with voting rights"),
    ("Shares held at present", "four ordinary shares of ten pounds each, fully paid"),
    ("Other duties", "serves on the water committee and keeps the library catalogue up to date"),
]
GLOSSARY = [
    ("Breakwater", "a wall of stone built out into the sea to shelter boats in the harbour from the waves"),
    ("Grindstone", "one of a pair of round stones between which grain is crushed into flour"),
    ("Ledger", "a book in which the accounts and decisions of the cooperative are written by hand"),
    ("Millrace", "the channel that carries water from the river to the wheel and back again"),
    ("Sluice", "a gate that opens or closes the millrace so that the wheel can be stopped"),
]


def _page(size: tuple[int, int] = (1275, 1650)) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    page = Image.new("RGB", size, "white")
    return page, ImageDraw.Draw(page)


def grey_page(grey: int, *, font_size: int = 26) -> LaidOutPage:
    """Black paragraphs with one paragraph of light-grey text between them (a note, a form's printed hint)."""
    page, draw = _page((1275, 1100))
    face = ImageFont.truetype(SANS, font_size)
    y, truth = 100, []
    for n, para in enumerate(TEXT[:3]):
        fill = (grey, grey, grey) if n == 1 else (0, 0, 0)
        for line in wrap(para, face, draw, 1050):
            draw.text((110, y), line, font=face, fill=fill)
            y += int(font_size * 1.5)
        y += font_size
        truth.append(para)
    return LaidOutPage(page, "\n".join(truth))


def columns_page(count: int = 2, *, margin: int = 110, top: int = 150, justified: bool = False, gutter: int = 50,
                 font_size: int = 24, font: str = SERIF, paragraphs: list[str] = TEXT) -> LaidOutPage:
    """`count` columns of body text, no title; `top` and `margin` narrow make the columns start and end within
    the page's top and bottom 7 %, where running heads and feet are. `justified` spreads each full line to the
    column's width, as typeset books do."""
    width, height = 1275, 1650
    page, draw = _page((width, height))
    face = ImageFont.truetype(font, font_size)
    col = (width - 2 * margin - gutter * (count - 1)) // count
    lines: list[tuple[str, bool]] = []
    for para in paragraphs:
        wrapped = wrap(para, face, draw, col)
        lines += [(ln, i == len(wrapped) - 1) for i, ln in enumerate(wrapped)]
    per = -(-len(lines) // count)
    pitch = min(int(font_size * 1.45), (height - 2 * top) // max(per - 1, 1))
    for n, (line, last) in enumerate(lines):
        x, y = margin + (n // per) * (col + gutter), top + pitch * (n % per)
        words = line.split(" ")
        if justified and not last and len(words) > 1:
            space = (col - sum(draw.textlength(w, font=face) for w in words)) / (len(words) - 1)
            for w in words:
                draw.text((x, y), w, font=face, fill="black")
                x += draw.textlength(w, font=face) + space
        else:
            draw.text((x, y), line, font=face, fill="black")
    return LaidOutPage(page, "\n".join(paragraphs))


def key_value_page(*, fields: list[tuple[str, str]] = FIELDS, font_size: int = 24, value_x: int = 420
                   ) -> LaidOutPage:
    """A form: each term on the left, its value at one x on the right, wrapped under itself where it is long."""
    page, draw = _page((1275, 1100))
    face = ImageFont.truetype(SANS, font_size)
    bold = ImageFont.truetype(SANS_BOLD, font_size)
    y, pitch = 120, int(font_size * 1.5)
    for term, value in fields:
        draw.text((110, y), term, font=bold, fill="black")
        for line in wrap(value, face, draw, 1165 - value_x):
            draw.text((value_x, y), line, font=face, fill="black")
            y += pitch
        y += font_size // 2
    return LaidOutPage(page, "\n".join(f"{term} {value}" for term, value in fields))


def merged_line(right: str = "I", *, font_size: int = 22, cut_at: int | None = None) -> Image.Image:
    """The crop of one detected line that two columns' lines were merged into, as tight as the detector's box:
    words, a gutter of 1.5 line heights, and `right` (a lone "I", a roman numeral: one stroke narrower than a
    quarter of the line's height). `cut_at` ends the crop that many pixels into `right`, as a box stretched to
    the next column's edge cuts its first letter."""
    face = ImageFont.truetype(SANS, font_size)
    left = "the second pair of grindstones"
    crop, draw = _page((700, int(font_size * 1.27)))
    draw.text((4, 0), left, font=face, fill="black")
    x = 4 + draw.textlength(left, font=face) + 1.5 * font_size
    draw.text((x, 0), right, font=face, fill="black")
    end = x + (cut_at if cut_at is not None else draw.textlength(right, font=face) + 4)
    return crop.crop((0, 0, int(end), crop.height))


def justified_rows(*, gutter: int = 24, font_size: int = 20, font: str = SANS, margin: int = 100, top: int = 120,
                   paragraphs: list[str] = TEXT
                   ) -> tuple[Image.Image, list[list[tuple[str, tuple[float, float, float, float]]]]]:
    """A justified two-column page, and its columns' lines as the detector boxes them one at a time: for each
    column, (text, box) top to bottom, each box (x0, y0, x1, y1) from the line's top to a fifth of the type size
    below its baseline."""
    width, height = 1275, 1100
    page, draw = _page((width, height))
    face = ImageFont.truetype(font, font_size)
    col = (width - 2 * margin - gutter) // 2
    lines: list[tuple[str, bool]] = []
    for para in paragraphs:
        wrapped = wrap(para, face, draw, col)
        lines += [(ln, i == len(wrapped) - 1) for i, ln in enumerate(wrapped)]
    per = -(-len(lines) // 2)
    pitch = int(font_size * 1.45)
    columns: list[list[tuple[str, tuple[float, float, float, float]]]] = [[], []]
    for n, (line, last) in enumerate(lines):
        x, y = margin + (n // per) * (col + gutter), top + pitch * (n % per)
        words = line.split(" ")
        space = ((col - sum(draw.textlength(w, font=face) for w in words)) / (len(words) - 1)
                 if not last and len(words) > 1 else draw.textlength(" ", font=face))
        start = x
        for w in words:
            draw.text((x, y), w, font=face, fill="black")
            x += draw.textlength(w, font=face) + space
        columns[n // per].append((line, (start, y, x - space, y + int(font_size * 1.2))))
    return page, columns


def figure_page(*, bars: int = 8, font_size: int = 24, grid: bool = False) -> LaidOutPage:
    """A paragraph, a framed bar chart (no text in it; with thin grid lines across it if `grid`) with its caption
    under it, and a paragraph."""
    page, draw = _page((1275, 1100))
    face = ImageFont.truetype(SERIF, font_size)
    y, truth = 100, []

    def paragraph(text: str) -> None:
        nonlocal y
        for line in wrap(text, face, draw, 1050):
            draw.text((110, y), line, font=face, fill="black")
            y += int(font_size * 1.45)
        y += font_size
        truth.append(text)

    paragraph(TEXT[0])
    x0, x1, top, bottom = 350, 900, y, y + 240
    draw.rectangle((x0, top, x1, bottom), outline="black", width=2)
    for n in range(1, 4) if grid else ():
        draw.line((x0, top + n * (bottom - top) // 4, x1, top + n * (bottom - top) // 4), fill="black", width=2)
        draw.line((x0 + n * (x1 - x0) // 4, top, x0 + n * (x1 - x0) // 4, bottom), fill="black", width=2)
    step = (x1 - x0 - 40) / bars
    for n in range(bars):
        height = 40 + (n * 67) % 170
        draw.rectangle((x0 + 20 + n * step + 4, bottom - 20 - height, x0 + 20 + (n + 1) * step - 4, bottom - 20),
                       fill=(90 + 10 * n,) * 3)
    draw.line((x0 + 15, bottom - 20, x1 - 15, bottom - 20), fill="black", width=2)
    y = bottom + font_size // 2
    caption = "Figure 2. Grain brought to the mill each month, in sacks."
    draw.text((x0, y), caption, font=ImageFont.truetype(SERIF, int(font_size * 0.85)), fill="black")
    truth.append(caption)
    y += 2 * font_size
    paragraph(TEXT[1])
    return LaidOutPage(page, "\n".join(truth))
