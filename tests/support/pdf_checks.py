"""Reading a PDF result back with two independent tools: poppler (pdftotext, qpdf) and pdfium."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageFont

from tests.documents.hostile import FONT_LATIN


def qpdf_check(path: Path) -> None:
    done = subprocess.run(["qpdf", "--check", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def poppler_text(path: Path, page: int | None = None) -> str:
    """pdftotext in content order (-raw): the order the text layer was written in, which is the reading order.

    Its default mode re-orders by geometry and, on widely spaced lines, reads two columns row by row.
    """
    pages = ["-f", str(page), "-l", str(page)] if page else []
    return subprocess.run(["pdftotext", "-raw", *pages, str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def pdfium_texts(path: Path) -> list[str]:
    doc = pdfium.PdfDocument(path)
    try:
        return [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    finally:
        doc.close()


def page_sizes(path: Path) -> list[tuple[float, float]]:
    doc = pdfium.PdfDocument(path)
    try:
        return [tuple(round(v, 1) for v in doc[i].get_size()) for i in range(len(doc))]
    finally:
        doc.close()


@dataclass(frozen=True)
class Word:
    text: str
    box: tuple[float, float, float, float]  # points, origin top-left, as pdftotext gives them


def poppler_words(path: Path, page: int = 1) -> list[Word]:
    xml = subprocess.run(["pdftotext", "-bbox-layout", "-f", str(page), "-l", str(page), str(path), "-"],
                         capture_output=True, text=True, check=True).stdout
    pattern = r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>'
    return [Word(unescape(m[5]), tuple(float(v) for v in m.groups()[:4])) for m in re.finditer(pattern, xml)]


def title_ink_box(image: Image.Image, *, skip: bool = False) -> tuple[int, int, int, int]:
    """Where the first band of ink (the second with skip, past a header) was printed, in pixels."""
    ink = np.asarray(image.convert("L")) < 128
    rows = np.flatnonzero(ink.any(axis=1))
    bands = np.split(rows, np.flatnonzero(np.diff(rows) > 3) + 1)
    band = bands[1 if skip else 0]
    columns = np.flatnonzero(ink[band[0]:band[-1] + 1].any(axis=0))
    return int(columns[0]), int(band[0]), int(columns[-1]) + 1, int(band[-1]) + 1


@dataclass
class TestPage:
    """A page the test draws, with the truth in reading order and where the title was printed (pixels)."""

    image: Image.Image
    truth: str
    title: str
    title_box: tuple[int, int, int, int]


def draw_page(title: str, columns: list[list[str]], *, size=(1190, 1540), font: str = FONT_LATIN,
              font_size: int = 34) -> TestPage:
    """A title across the top, then one or more columns of lines; the truth reads column by column."""
    page = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(page)
    margin = size[0] // 12
    title_face = ImageFont.truetype(font, int(font_size * 1.6))
    draw.text((margin, margin), title, font=title_face, fill="black")
    title_box = draw.textbbox((margin, margin), title, font=title_face)
    face = ImageFont.truetype(font, font_size)
    width = (size[0] - 2 * margin) // len(columns)
    for n, lines in enumerate(columns):
        y = title_box[3] + 2 * font_size
        for line in lines:
            draw.text((margin + n * width, y), line, font=face, fill="black")
            y += int(font_size * 1.6)
    truth = "\n".join([title, *(line for lines in columns for line in lines)])
    return TestPage(page, truth, title, tuple(title_box))
