"""Small pages drawn for the layout-format tests: each engine reads them in a few seconds on 2 cores."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from tests.support.pages import SERIF, SERIF_BOLD

TITLE = "Harbour Survey"
LEFT = ["The quay was built of granite", "blocks laid in lime mortar and", "faced with oak along its edge."]
RIGHT = ["Ships of deep draught came in", "on the morning tide and left", "before the evening ebb began."]
TABLE = [["Vessel", "Tons", "Berth"], ["Mary Ann", "340", "North"], ["Good Hope", "215", "South"]]


def _draw(size=(1100, 520)):
    page = Image.new("RGB", size, "white")
    return page, ImageDraw.Draw(page), ImageFont.truetype(SERIF, 28), ImageFont.truetype(SERIF_BOLD, 40)


def one_column() -> Image.Image:
    page, draw, face, bold = _draw()
    draw.text((60, 40), TITLE, font=bold, fill="black")
    for i, line in enumerate(LEFT + RIGHT):
        draw.text((60, 130 + i * 44), line, font=face, fill="black")
    return page


def two_columns() -> Image.Image:
    page, draw, face, bold = _draw((1200, 420))
    draw.text((60, 40), TITLE, font=bold, fill="black")
    for column, lines in ((60, LEFT), (640, RIGHT)):
        for i, line in enumerate(lines):
            draw.text((column, 130 + i * 44), line, font=face, fill="black")
    return page


def table() -> Image.Image:
    page, draw, face, bold = _draw((900, 360))
    draw.text((60, 30), "Arrivals", font=bold, fill="black")
    for r, row in enumerate(TABLE):
        for c, cell in enumerate(row):
            draw.text((60 + c * 280, 120 + r * 70), cell, font=face, fill="black")
    return page


def short(text: str) -> Image.Image:
    page, draw, face, bold = _draw((900, 300))
    draw.text((60, 40), text, font=bold, fill="black")
    draw.text((60, 140), "granite blocks and oak facing", font=face, fill="black")
    return page
