"""Small images (a label, a caption, a cut-out of a few lines) are read as they are, not scaled up first.

rapidocr scaled every image whose short side is under 736 px up to 736 before detection; on small images the
detector then lost or split lines: 200 generated snippets read at CER 0.045-0.088 that way, against 0.002-0.003
unscaled (bench/cpu_small_images.py, BENCHMARKS.md)."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.support.text import cer
from worker.engines.cpu import CpuEngine

FONTS = "/usr/share/fonts/truetype"
SNIPPETS = [
    ("dejavu/DejaVuSerif.ttf", 26, ["Please send the signed contract", "back to our office before May 3."]),
    ("dejavu/DejaVuSans.ttf", 34, ["Invoice 7731-B"]),
    ("dejavu/DejaVuSansMono.ttf", 20, ["Damaged goods should be", "reported in writing within", "seven days."]),
    ("liberation/LiberationSerif-Regular.ttf", 44, ["Room 214, third floor"]),
    ("liberation/LiberationSans-Regular.ttf", 16, ["Die Rechnung ist innerhalb von", "dreißig Tagen zu zahlen."]),
    ("dejavu/DejaVuSansCondensed.ttf", 26, ["La réunion aura lieu", "dans la salle 12."]),
    ("liberation/LiberationMono-Regular.ttf", 34, ["Ref. 2024-0815"]),
    ("dejavu/DejaVuSerif.ttf", 13, ["Our support team answers every request within two working days."]),
]


def snippet(font: str, size: int, lines: list[str]) -> Image.Image:
    face = ImageFont.truetype(f"{FONTS}/{font}", size)
    margin, pitch = 12, int(size * 1.4)
    image = Image.new("RGB", (max(face.getbbox(line)[2] for line in lines) + 2 * margin,
                              pitch * len(lines) + 2 * margin), "white")
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((margin, margin + n * pitch), line, font=face, fill="black")
    return image


@pytest.fixture(scope="module")
def engine():
    engine = CpuEngine()
    yield engine
    engine.close()


@pytest.mark.parametrize(("font", "size", "lines"), SNIPPETS,
                         ids=[f"{font.split('/')[1][:-4]}-{size}px" for font, size, _ in SNIPPETS])
def test_a_small_image_is_read_whole(engine, font, size, lines):
    image = snippet(font, size, lines)
    assert min(image.size) < 736
    [page] = engine.read([image])
    assert cer(" ".join(lines), page.text) < 0.02, page.text
