"""A second corpus, the check on the reading order (issue 56): layouts bench/cpu_corpus.py never makes, in other texts,
fonts and sizes, from a seed space of its own. No setting is chosen on it; bench/cpu_corpus.py stays the tuning set.

Kinds: key-value forms and glossaries, justified two-column pages, two columns with narrow margins, headings of
1.1-1.6 times the body's size over paragraphs, a heading above a table, bulleted and numbered lists with wrapped
items, a paragraph of light-grey text (grey 150-200), footnotes (small text under a short rule at the page's foot,
marked in the text above), a figure (a drawn picture, no text in it) with its caption under it, a sidebar (a
shaded or ruled narrow box of smaller text beside the main text) and a pull quote (a sentence in large bold type
between rules, set into the column between two paragraphs). English prose written for this corpus (country life,
weather, railways), Liberation, Noto and FreeFont faces (no DejaVu), 9-13 pt at 150 dpi on 8.5 x 7.3 in pages.

    .venv/bin/python bench/layout_corpus.py --out /tmp/layouts [--seed 1] [--per-kind 6]

writes page PNGs and index.json ({"pages": [{"name", "kind", "font", "size", "truth", "units"}]}): `truth` is the
text in a reader's order, `units` its parts in that order, each {"kind": heading | item | cell | text, "text"}
(a numbered item also its "mark", "1.", which the truth holds as the page prints it).

The truth's order, where a reader has to choose one: the main text first, then a sidebar as one block (its title,
a heading, being bold on a line of its own, then its text), then the footnotes in their order; a reference mark is
the page's text, right after its word ("harvest2"), and a footnote starts with its mark ("2 The ..."). A caption
is read where it stands, after the text above its figure; a pull quote too, between the paragraphs it is set
between. A pull quote repeats no sentence of the page (so that each part of the truth has one place). Footnotes,
captions, sidebars' text and pull quotes are text units: a pull quote read as a heading costs heading F1.

    .venv/bin/python bench/layout_corpus.py --out /tmp/layouts --kinds footnotes,captions,sidebar,pull_quote
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

TTF = Path("/usr/share/fonts/truetype")
FONTS = {
    "liberation-serif": ("liberation/LiberationSerif-Regular.ttf", "liberation/LiberationSerif-Bold.ttf"),
    "liberation-sans": ("liberation/LiberationSans-Regular.ttf", "liberation/LiberationSans-Bold.ttf"),
    "liberation-narrow": ("liberation/LiberationSansNarrow-Regular.ttf", "liberation/LiberationSansNarrow-Bold.ttf"),
    "noto-serif": ("noto/NotoSerif-Regular.ttf", "noto/NotoSerif-Bold.ttf"),
    "noto-sans": ("noto/NotoSans-Regular.ttf", "noto/NotoSans-Bold.ttf"),
    "free-serif": ("freefont/FreeSerif.ttf", "freefont/FreeSerifBold.ttf"),
    "free-sans": ("freefont/FreeSans.ttf", "freefont/FreeSansBold.ttf"),
}
KINDS = ("key_value", "glossary", "justified", "narrow_margins", "headings", "table_heading", "list", "grey",
         "footnotes", "captions", "sidebar", "pull_quote")
SIZE = (1275, 1100)
DPI = 150

SENTENCES = [
    "The first frost came early that year and killed the late beans in every garden along the lane.",
    "A carrier brought the post twice a week, weather allowing, and waited at the inn for replies.",
    "The branch line climbed through three cuttings and a short tunnel before it reached the quarry.",
    "Rain gauges were read at nine each morning and the figures sent to the county office by card.",
    "Most cottages kept a pig, a few hens and a row of currant bushes behind the wash house.",
    "The stationmaster grew roses on the up platform and won a prize for them in the summer show.",
    "When the river rose, the lower meadow flooded and the cattle were moved to the common.",
    "Coal came by rail in open wagons and was sold by the hundredweight from a yard by the goods shed.",
    "The school closed for two weeks in October so that children could help with the potato harvest.",
    "An old windmill on the ridge had lost its sails but was still used as a store for seed corn.",
    "Visitors walked up from the halt on Sundays to see the bluebells in the wood behind the church.",
    "The blacksmith also mended bicycles, and in later years sold petrol from a hand pump.",
    "Fog lay in the valley most mornings in November and lifted only by the middle of the day.",
    "The parish council met in the reading room, which had a stove, two lamps and a long table.",
    "Hay was cut in June if the weather held, turned by hand and carted to the ricks by evening.",
    "A signal box stood at the junction, and its keeper kept a register of every train that passed.",
]
TERMS = ["Station", "Opened", "Closed to goods", "Platforms", "Nearest village", "Owner of the line",
         "Usual traffic", "Water supply", "Signal box", "Notes on the site"]
VALUES = ["Lower Ashby, on the branch from the junction", "the spring of the year after the survey",
          "after the last quarry train ran in the autumn", "two, with a footbridge between them",
          "Ashby Green, about a mile along the lane", "the Vale and Ridge Railway Company",
          "milk, coal, seed corn and passengers on market days", "a tank fed from the spring above the cutting",
          "a wooden cabin of twelve levers at the end of the up platform",
          "the goods shed survives as a store; the platforms are overgrown"]
GLOSSARY = [("Cutting", "a trench dug through high ground so that the line can stay level"),
            ("Halt", "a small stopping place without staff, where trains call on request"),
            ("Rick", "a stack of hay or straw built in the open and thatched against rain"),
            ("Siding", "a short track beside the main line where wagons are left to be loaded"),
            ("Gauge", "an instrument that measures how much rain has fallen in a day"),
            ("Common", "land on which every household of the parish may graze its animals"),
            ("Levers", "the handles in a signal box that move points and signals by wire")]
HEADINGS = ["The Branch Line", "Weather and Crops", "Life in the Village", "The Old Mill", "Goods and Passengers",
            "Winter Months", "The Reading Room"]
NOTES = ["The figures are those of the county survey, which counted only households with a rated holding.",
         "Later accounts give a different year, but the parish register records the event in this one.",
         "The company's minute books were lost in a fire at its offices, and this is the only copy known.",
         "A rain gauge of the same pattern is kept in the museum at the market town.",
         "Local people still call the field by its old name, though the hedge that parted it is gone."]
CAPTIONS = ["The goods shed and the loading gauge, seen from the end of the down platform.",
            "Monthly rainfall at the gauge by the school, in inches, over one year.",
            "The ridge with the old windmill, drawn from the lane below the church.",
            "Passengers booked at the halt each year, from the company's returns."]
SIDEBARS = [("Opening Times", "The reading room is open on weekday evenings from six until nine, and on "
             "Saturday afternoons in winter. Members may borrow two books at a time."),
            ("A Note on Sources", "Most of what is known of the line comes from the timetables posted at the "
             "halt and from the memories of people who worked on it."),
            ("Weather Records", "The gauge readings were kept in a bound book by the schoolmaster, who sent a "
             "copy of each month's figures to the county office.")]
QUOTES = ["Nobody in the village could remember a winter when the river had not come over the lower meadow.",
          "The last train left the halt in silence, and the next morning the rails were already rusting.",
          "Every house along the lane kept its own almanac, and each one disagreed about the weather."]
CELLS = [["Year", "Passengers", "Goods"], ["1901", "4,210", "1,330"], ["1911", "5,870", "2,015"],
         ["1921", "3,940", "2,460"], ["1931", "2,105", "1,870"], ["1941", "2,980", "2,240"]]


def _wrap(text: str, face: ImageFont.FreeTypeFont, draw: ImageDraw.ImageDraw, width: float) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if draw.textlength(candidate, font=face) <= width or not line:
            line = candidate
        else:
            lines.append(line)
            line = word
    return lines + [line]


class Page:
    """A page being drawn: a cursor down it, and its truth in a reader's order."""

    def __init__(self, rng: random.Random, font: str, px: int) -> None:
        self.rng, self.px = rng, px
        self.image = Image.new("RGB", SIZE, "white")
        self.draw = ImageDraw.Draw(self.image)
        regular, bold = FONTS[font]
        self.face = ImageFont.truetype(str(TTF / regular), px)
        self.bold_path = str(TTF / bold)
        self.units: list[dict] = []
        self.y, self.left, self.right = 90, 100, SIZE[0] - 100

    def paragraph(self, text: str, *, x: float | None = None, width: float | None = None, fill=(0, 0, 0)) -> None:
        x = self.left if x is None else x
        for line in _wrap(text, self.face, self.draw, width or self.right - x):
            self.draw.text((x, self.y), line, font=self.face, fill=fill)
            self.y += round(self.px * 1.4)
        self.y += self.px
        self.units.append({"kind": "text", "text": text})

    def heading(self, text: str, ratio: float) -> None:
        face = ImageFont.truetype(self.bold_path, round(self.px * ratio))
        self.draw.text((self.left, self.y), text, font=face, fill="black")
        self.y += round(self.px * ratio * 1.9)
        self.units.append({"kind": "heading", "text": text})


def _marked(page: Page, words: list[tuple[str, str]], *, width: float, note: ImageFont.FreeTypeFont) -> None:
    """Words of a paragraph, each with its reference mark raised after it (or ""), wrapped and drawn."""
    space = page.draw.textlength(" ", font=page.face)
    x = page.left
    for word, mark in words:
        w = page.draw.textlength(word, font=page.face) + (page.draw.textlength(mark, font=note) if mark else 0)
        if x > page.left and x + w > page.left + width:
            x, page.y = page.left, page.y + round(page.px * 1.4)
        page.draw.text((x, page.y), word, font=page.face, fill="black")
        if mark:
            page.draw.text((x + page.draw.textlength(word, font=page.face), page.y - round(page.px * 0.25)), mark,
                           font=note, fill="black")
        x += w + space
    page.y += round(page.px * 1.4) + page.px


def _figure(draw: ImageDraw.ImageDraw, rng: random.Random, box: tuple[int, int, int, int]) -> None:
    """A drawn picture without text in it: a bar chart, or hills under a sun, in a frame."""
    x0, y0, x1, y1 = box
    draw.rectangle(box, outline="black", width=2)
    if rng.random() < 0.5:
        bars = rng.randint(5, 12)
        step = (x1 - x0 - 40) / bars
        for n in range(bars):
            top = rng.randint(y0 + 20, y1 - 30)
            grey = rng.randint(60, 180)
            draw.rectangle((x0 + 20 + n * step + 4, top, x0 + 20 + (n + 1) * step - 4, y1 - 20), fill=(grey,) * 3)
        draw.line((x0 + 15, y1 - 20, x1 - 15, y1 - 20), fill="black", width=2)
    else:
        r = (y1 - y0) // 8
        cx, cy = rng.randint(x0 + 2 * r, x1 - 2 * r), y0 + 2 * r
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=(200, 200, 200), outline="black")
        for n in range(3):
            peaks = [(x0 + 2, y1 - 2)] + [(x, rng.randint(y0 + (y1 - y0) // 3 + n * 20, y1 - 20))
                                         for x in range(x0, x1, max((x1 - x0) // 6, 1))] + [(x1 - 2, y1 - 2)]
            draw.polygon(peaks, fill=(200 - 50 * n,) * 3, outline="black")


def _prose(rng: random.Random, sentences: int) -> str:
    """Sentences from the page's own shuffled deck: no sentence twice on a page, so each part has one place."""
    deck = _DECKS.setdefault(id(rng), rng.sample(SENTENCES, len(SENTENCES)))
    return " ".join(deck.pop() for _ in range(sentences))


_DECKS: dict[int, list[str]] = {}


def render(kind: str, rng: random.Random, font: str, px: int) -> Page:
    page = Page(rng, font, px)
    draw = page.draw
    if kind in ("key_value", "glossary"):
        pairs = (list(zip(TERMS, VALUES, strict=True)) if kind == "key_value" else GLOSSARY)
        pairs = rng.sample(pairs, rng.randint(5, min(8, len(pairs))))
        term_face = ImageFont.truetype(page.bold_path, px)
        value_x = page.left + max(draw.textlength(t, font=term_face) for t, _ in pairs) + rng.randint(2, 5) * px
        for term, value in pairs:
            draw.text((page.left, page.y), term, font=term_face, fill="black")
            for line in _wrap(value, page.face, draw, page.right - value_x):
                draw.text((value_x, page.y), line, font=page.face, fill="black")
                page.y += round(px * 1.4)
            page.y += px // 2
            page.units.append({"kind": "text", "text": f"{term} {value}"})
    elif kind in ("justified", "narrow_margins"):
        margin, top = (rng.randint(40, 70), rng.randint(30, 50)) if kind == "narrow_margins" else (100, 90)
        gutter = rng.randint(24, 45) if kind == "justified" else rng.randint(35, 60)
        col = (SIZE[0] - 2 * margin - gutter) / 2
        paragraphs = [_prose(rng, rng.randint(2, 3)) for _ in range(rng.randint(3, 4))]
        lines = []
        for para in paragraphs:
            wrapped = _wrap(para, page.face, draw, col)
            lines += [(ln, i == len(wrapped) - 1) for i, ln in enumerate(wrapped)]
        per = -(-len(lines) // 2)
        pitch = min(round(px * 1.45), (SIZE[1] - 2 * top) / max(per - 1, 1))
        for n, (line, last) in enumerate(lines):
            x, y = margin + (n // per) * (col + gutter), top + pitch * (n % per)
            words = line.split()
            if kind == "justified" and not last and len(words) > 1:
                space = (col - sum(draw.textlength(w, font=page.face) for w in words)) / (len(words) - 1)
                for w in words:
                    draw.text((x, y), w, font=page.face, fill="black")
                    x += draw.textlength(w, font=page.face) + space
            else:
                draw.text((x, y), line, font=page.face, fill="black")
        page.units = [{"kind": "text", "text": p} for p in paragraphs]
    elif kind == "headings":
        for title in rng.sample(HEADINGS, 2):
            page.heading(title, rng.uniform(1.1, 1.6))
            page.paragraph(_prose(rng, rng.randint(2, 3)))
    elif kind == "table_heading":
        page.paragraph(_prose(rng, 1))
        page.heading(rng.choice(HEADINGS), rng.uniform(1.15, 1.5))
        xs = [page.left, page.left + 300, page.left + 600]
        for row in CELLS[:rng.randint(4, len(CELLS))]:
            for x, cell in zip(xs, row, strict=True):
                draw.text((x, page.y), cell, font=page.face, fill="black")
                page.units.append({"kind": "cell", "text": cell})
            page.y += round(px * 1.6)
    elif kind == "list":
        page.paragraph(_prose(rng, 1))
        numbered = rng.random() < 0.5
        for n, sentence in enumerate([_prose(rng, 1) for _ in range(rng.randint(3, 5))], 1):
            mark = f"{n}." if numbered else "•"
            draw.text((page.left, page.y), mark, font=page.face, fill="black")
            indent = page.left + 2 * px
            for line in _wrap(sentence, page.face, draw, rng.randint(550, 900)):
                draw.text((indent, page.y), line, font=page.face, fill="black")
                page.y += round(px * 1.4)
            page.y += px // 3
            # A number is the page's text, as a bullet is not (markdown and plain text keep "1.", not "•").
            page.units.append({"kind": "item", "text": sentence} | ({"mark": mark} if numbered else {}))
    elif kind == "grey":
        grey = rng.randint(150, 200)
        for n in range(3):
            page.paragraph(_prose(rng, 2), fill=(grey,) * 3 if n == 1 else (0, 0, 0))
    elif kind == "footnotes":
        note = ImageFont.truetype(page.face.path, round(px * rng.uniform(0.7, 0.8)))
        notes = rng.sample(NOTES, rng.randint(1, 3))
        paragraphs = [_prose(rng, rng.randint(2, 3)).split() for _ in range(2)]
        marks = sorted(rng.sample([(p, w) for p in range(2) for w in range(2, len(paragraphs[p]) - 1)], len(notes)))
        for n, (p, w) in enumerate(marks, 1):
            paragraphs[p][w] = (paragraphs[p][w], str(n))
        for para in paragraphs:
            words = [w if isinstance(w, tuple) else (w, "") for w in para]
            _marked(page, words, width=page.right - page.left, note=note)
            page.units.append({"kind": "text", "text": " ".join(w + m for w, m in words)})
        lines = [(n, ln) for n, text in enumerate(notes, 1)
                 for ln in _wrap(f"{n} {text}", note, draw, page.right - page.left)]
        pitch = round(note.size * 1.35)
        y = SIZE[1] - rng.randint(50, 80) - pitch * len(lines)
        draw.line((page.left, y - note.size, page.left + rng.randint(200, 350), y - note.size), fill="black", width=1)
        for _, line in lines:
            draw.text((page.left, y), line, font=note, fill="black")
            y += pitch
        page.units += [{"kind": "text", "text": f"{n} {text}"} for n, text in enumerate(notes, 1)]
    elif kind == "captions":
        page.paragraph(_prose(rng, rng.randint(1, 2)))
        width, height = rng.randint(300, 650), rng.randint(150, 280)
        x0 = rng.choice([page.left, (SIZE[0] - width) // 2])
        _figure(draw, rng, (x0, page.y, x0 + width, page.y + height))
        page.y += height + px // 2
        caption_face = ImageFont.truetype(page.face.path, round(px * rng.uniform(0.8, 0.95)))
        caption = f"Figure {rng.randint(1, 9)}. {rng.choice(CAPTIONS)}"
        for line in _wrap(caption, caption_face, draw, max(width, 500)):
            draw.text((x0, page.y), line, font=caption_face, fill="black")
            page.y += round(caption_face.size * 1.4)
        page.y += px
        page.units.append({"kind": "text", "text": caption})
        page.paragraph(_prose(rng, rng.randint(1, 2)))
    elif kind == "sidebar":
        box_w = rng.randint(300, 380)
        gap = rng.randint(30, 60)
        on_left = rng.random() < 0.3
        main_x = page.left + box_w + gap if on_left else page.left
        main_w = page.right - page.left - box_w - gap
        for _ in range(rng.randint(2, 3)):
            page.paragraph(_prose(rng, 2), x=main_x, width=main_w)
        title, text = rng.choice(SIDEBARS)
        small = ImageFont.truetype(page.face.path, round(px * rng.uniform(0.8, 0.9)))
        bold = ImageFont.truetype(page.bold_path, small.size)
        pad = rng.randint(12, 20)
        bx0 = page.left if on_left else page.right - box_w
        lines = _wrap(text, small, draw, box_w - 2 * pad)
        pitch = round(small.size * 1.35)
        by0 = 90 + rng.randint(0, 150)
        by1 = by0 + 2 * pad + pitch * (len(lines) + 1) + small.size // 2
        shade = rng.randint(225, 240) if rng.random() < 0.6 else 255
        draw.rectangle((bx0, by0, bx0 + box_w, by1), fill=(shade,) * 3, outline="black" if shade == 255 else None,
                       width=2)
        y = by0 + pad
        draw.text((bx0 + pad, y), title, font=bold, fill="black")
        y += pitch + small.size // 2
        for line in lines:
            draw.text((bx0 + pad, y), line, font=small, fill="black")
            y += pitch
        page.units += [{"kind": "heading", "text": title}, {"kind": "text", "text": text}]
    elif kind == "pull_quote":
        page.paragraph(_prose(rng, rng.randint(2, 3)))
        quote = ImageFont.truetype(page.bold_path, round(px * rng.uniform(1.3, 1.8)))
        indent = rng.randint(60, 160)
        text = rng.choice(QUOTES)
        draw.line((page.left + indent, page.y, page.right - indent, page.y), fill="black", width=2)
        page.y += quote.size // 2
        for line in _wrap(text, quote, draw, page.right - page.left - 2 * indent):
            draw.text((page.left + indent, page.y), line, font=quote, fill="black")
            page.y += round(quote.size * 1.3)
        page.y += quote.size // 3
        draw.line((page.left + indent, page.y, page.right - indent, page.y), fill="black", width=2)
        page.y += px
        page.units.append({"kind": "text", "text": text})
        for _ in range(2):
            page.paragraph(_prose(rng, 2))
    return page


def generate(out: Path, *, seed: int, per_kind: int, kinds: tuple[str, ...] = KINDS) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    for kind in kinds:
        for n in range(per_kind):
            # A string seed: a seed space apart from bench/cpu_corpus.py's integers.
            rng = random.Random(f"layouts/{seed}/{kind}/{n}")
            font = rng.choice(sorted(FONTS))
            px = round(rng.uniform(9, 13) * DPI / 72)
            page = render(kind, rng, font, px)
            _DECKS.pop(id(rng), None)
            name = f"{kind}-{n:02d}"
            page.image.save(out / f"{name}.png")
            truth = "\n".join(" ".join(filter(None, (unit.get("mark"), unit["text"]))) for unit in page.units)
            pages.append({"name": name, "kind": kind, "font": font, "size": px, "dpi": DPI, "lang": "en", "truth": truth,
                          "units": page.units})
    index = {"seed": seed, "pages": pages}
    (out / "index.json").write_text(json.dumps(index, indent=1))
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-kind", type=int, default=6)
    parser.add_argument("--kinds", help=f"comma-separated kinds to draw (default all: {','.join(KINDS)})")
    args = parser.parse_args()
    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    index = generate(args.out, seed=args.seed, per_kind=args.per_kind, kinds=kinds)
    print(f"{len(index['pages'])} pages in {args.out}")


if __name__ == "__main__":
    main()
