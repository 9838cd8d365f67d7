"""Bullets the detector does not box, found by their ink (issue 56)."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from worker.engines.cpu import _with_bullets
from worker.engines.reading_order import Line


def _line(text: str, box: tuple[int, int, int, int]) -> Line:
    return Line(text=text, box=box, confidence=0.99, key=tuple(float(v) for v in box))


def test_a_bullet_left_of_a_line_starts_its_text_and_a_speck_or_a_word_does_not():
    """A "•" two line heights left of its item's text was not detected, and the items read as one paragraph."""
    image = Image.new("RGB", (1000, 400), "white")
    draw = ImageDraw.Draw(image)
    draw.ellipse((104, 160, 113, 169), fill="black")  # a bullet, 9 px in a 28 px line
    draw.point((110, 262), fill="black")  # a speck of dust: too small
    draw.text((100, 310), "Note", fill="black")  # a word of its own left of the line
    lines = [_line("An old windmill on the ridge", (147, 151, 778, 178)),
             _line("Coal came by rail in open wagons", (147, 251, 754, 278)),
             _line("A signal box stood at the junction", (147, 301, 882, 329))]
    out = _with_bullets(np.asarray(image), lines)
    assert [ln.text for ln in out] == ["• An old windmill on the ridge", "Coal came by rail in open wagons",
                                       "A signal box stood at the junction"]
    assert out[0].box[0] == 104 and out[0].key[0] == 104
