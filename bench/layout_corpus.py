"""A second corpus, the check on the reading order (issue 56): layouts bench/cpu_corpus.py never makes, in other texts,
fonts and sizes, from a seed space of its own. No setting is chosen on it; bench/cpu_corpus.py stays the tuning set.

Kinds: key-value forms and glossaries, justified two-column pages, two columns with narrow margins, headings of
1.1-1.6 times the body's size over paragraphs, a heading above a table, bulleted and numbered lists with wrapped
items, and a paragraph of light-grey text (grey 150-200). English prose written for this corpus (country life,
weather, railways), Liberation, Noto and FreeFont faces (no DejaVu), 9-13 pt at 150 dpi on 8.5 x 7.3 in pages.

    .venv/bin/python bench/layout_corpus.py --out /tmp/layouts [--seed 1] [--per-kind 6]

writes page PNGs and index.json ({"pages": [{"name", "kind", "font", "size", "truth", "units"}]}): `truth` is the
text in a reader's order, `units` its parts in that order, each {"kind": heading | item | cell | text, "text"}
(a numbered item also its "mark", "1.", which the truth holds as the page prints it).
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
KINDS = ("key_value", "glossary", "justified", "narrow_margins", "headings", "table_heading", "list", "grey")
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
    return page


def generate(out: Path, *, seed: int, per_kind: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    pages = []
    for kind in KINDS:
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
    args = parser.parse_args()
    index = generate(args.out, seed=args.seed, per_kind=args.per_kind)
    print(f"{len(index['pages'])} pages in {args.out}")


if __name__ == "__main__":
    main()
