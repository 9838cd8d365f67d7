"""Pages laid out like documents (title, columns, sidebar, header, footer), each with its reading order.

A page is drawn on US Letter at 150 DPI (1275 x 1650 px) in DejaVu Serif; `truth` is its text in the
order a reader takes it: header, title, each column top to bottom left to right, sidebar, footer.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from tests.documents.hostile import _wrap as wrap  # CJK text, having no spaces, wraps per character

SERIF = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
SERIF_BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf"
SANS_CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
LETTER_150 = (1275, 1650)

PARAGRAPHS = [
    ("The harbour authority opened the northern quay in the spring of that year, after a winter of "
    "storms had closed the old landing twice. Fishing boats moved first, then the ferries, and by "
    "midsummer the market had followed them along the shore."),
    ("Records kept by the clerk show forty vessels registered in April and sixty-two by October. Most "
    "were small wooden boats with a single mast, owned by families who had worked the same waters for "
    "generations and who paid their dues in coin or in fish."),
    ("A surveyor from the capital arrived in August to measure the depth of the channel. His report "
    "recommended dredging the eastern approach and building a breakwater of granite blocks, a project "
    "that took eleven years and most of the town's savings."),
    ("Trade in salted cod grew quickly once the breakwater stood. Merchants built warehouses of brick "
    "behind the quay, and a narrow railway carried barrels inland to the junction at Morwick, where "
    "they joined the main line south."),
    ("Not everyone welcomed the change. Older residents complained of noise at night, of strangers in the "
    "taverns, and of rents that doubled within a decade. A petition to the council asked for the market "
    "to close on Sundays; it was refused."),
    ("By the turn of the century the town had a school, two churches, a lifeboat station and a small "
    "hospital. The population, counted at nine hundred in the first census, had passed four thousand, "
    "and the old landing was used only by children learning to swim."),
]
SIDEBAR = ("Key dates: the quay opened in April, the survey came in August, and the breakwater was "
           "finished eleven years later.")
CJK_PARAGRAPHS = [
    "港口管理局在那年春天开放了北码头。冬天的风暴曾两次关闭旧码头，渔船首先迁移，随后是渡轮。",
    "到了夏天，市场也沿着海岸搬了过来。书记员的记录显示，四月登记了四十艘船，十月增加到六十二艘。",
    "请求书は納品後三十日以内にお支払いください。港の記録は町の図書館に保管されています。",
]


@dataclass
class LaidOutPage:
    image: Image.Image
    truth: str


def column_page(columns: int, *, paragraphs: list[str] = PARAGRAPHS, title: str | None = "The Northern Quay",
                header: str | None = None, footer: str | None = None, sidebar: str | None = None,
                font: str = SERIF, title_font: str = SERIF_BOLD, font_size: int = 22, gutter: int = 50) -> LaidOutPage:
    """Paragraphs flowed through `columns` columns under a title that spans them all."""
    width, height = LETTER_150
    page = Image.new("RGB", LETTER_150, "white")
    draw = ImageDraw.Draw(page)
    face = ImageFont.truetype(font, font_size)
    margin, pitch = 110, int(font_size * 1.45)
    truth: list[str] = []
    if header:
        small = ImageFont.truetype(font, 18)
        draw.text((margin, 50), header, font=small, fill="black")
        truth.append(header)
    y = 150
    if title:
        big = ImageFont.truetype(title_font, 44)
        draw.text((margin, y), title, font=big, fill="black")
        truth.append(title)
        y += 100
    right = width - margin
    body_right = right - (300 if sidebar else 0)
    col_width = (body_right - margin - gutter * (columns - 1)) // columns
    bottom = height - 170
    lines: list[tuple[str, bool]] = []  # (line, last line of its paragraph)
    for para in paragraphs:
        wrapped = wrap(para, face, draw, col_width)
        lines += [(ln, i == len(wrapped) - 1) for i, ln in enumerate(wrapped)]
        truth.append(para)
    # Balance the columns: as many lines in each, a blank line between paragraphs.
    slots = len(lines) + sum(last for _, last in lines)
    per_column = -(-slots // columns)
    x, cy, used = margin, y, 0
    for ln, last in lines:
        if used >= per_column:
            x, cy, used = x + col_width + gutter, y, 0
        draw.text((x, cy), ln, font=face, fill="black")
        cy += pitch
        used += 1
        if last and used < per_column:
            cy += pitch
            used += 1
        if cy > bottom:
            raise ValueError("text does not fit the page")
    if sidebar:
        side_face = ImageFont.truetype(font, 20)
        sy = y
        for ln in wrap(sidebar, side_face, draw, right - body_right - gutter):
            draw.text((body_right + gutter, sy), ln, font=side_face, fill="black")
            sy += 30
        truth.append(sidebar)
    if footer:
        small = ImageFont.truetype(font, 18)
        draw.text((margin, height - 80), footer, font=small, fill="black")
        truth.append(footer)
    return LaidOutPage(page, "\n".join(truth))

