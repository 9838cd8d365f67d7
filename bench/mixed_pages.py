"""Pages read from their text whose pictures hold text: the `mixed` path (the text layer, and the engine on the
pictures' regions only) against OCR of the whole page, on the CPU engine, in one process: seconds a page and word
F1 against the page's truth (its prose and its pictures' words).

The pages: reportlab A4, 24 lines of Times 11 pt prose, and one picture (about 5 % of the page) holding two words
in bold sans, its place and words varying with the page; seeded.

    .venv/bin/python bench/mixed_pages.py --pages 10
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.documents import render_page  # noqa: E402
from common.documents.limits import Limits  # noqa: E402
from common.documents.text_layer import read_text_layer  # noqa: E402
from tests.documents.hostile import lettered  # noqa: E402
from worker.engines import pictures, text_layer  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402

WORDS = "harbour quay ledger cargo tide rope anchor hull mast sail dock crane barrel customs pilot".split()
SIGNS = ["LIGHTHOUSE KEEPER", "NORTH QUAY", "CUSTOMS HOUSE", "FERRY TIMES", "PILOT STATION", "DRY DOCK"]


def page(path: Path, rng: random.Random) -> list[str]:
    """One page at path; its words in order."""
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Times-Roman", 11)
    truth = []
    sign = rng.choice(SIGNS)
    at = rng.randrange(4, 20)
    for i in range(24):
        line = " ".join(rng.choice(WORDS) for _ in range(11))
        y = 790 - i * 15 - (110 if i >= at else 0)
        c.drawString(72, y, line)
        truth += line.split()
        if i == at - 1:
            buffer = io.BytesIO()
            picture = lettered(sign)
            picture.save(buffer, "PNG")
            c.drawImage(ImageReader(io.BytesIO(buffer.getvalue())), 72 + rng.randrange(0, 200), y - 100,
                        width=240, height=240 * picture.height / picture.width)
            truth += sign.split()
    c.save()
    return truth


def f1(ours: list[str], truth: list[str]) -> float:
    common = sum((Counter(ours) & Counter(truth)).values())
    return 2 * common / (len(ours) + len(truth))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10)
    args = parser.parse_args()
    rng = random.Random(51)
    engine = CpuEngine()
    limits = Limits()
    times = {"mixed": [], "ocr": []}
    scores = {"mixed": [], "ocr": []}
    with tempfile.TemporaryDirectory() as tmp:
        engine.read([lettered("WARM UP")])
        for n in range(args.pages):
            path = Path(tmp) / f"p{n}.pdf"
            truth = page(path, rng)
            started = time.perf_counter()
            layer = read_text_layer(path, 0, limits=limits)
            rendered = render_page(path, 0, limits=limits)
            regions = pictures.regions(rendered.image, layer)
            own = text_layer.text_lines(layer)
            found = [line for region, result in zip(regions, engine.read([r.image for r in regions]), strict=True)
                     for line in pictures.lines(region, result, own)]
            mixed = text_layer.read(layer, found).text
            times["mixed"].append(time.perf_counter() - started)
            started = time.perf_counter()
            ocr = engine.read([render_page(path, 0, limits=limits).image])[0].text
            times["ocr"].append(time.perf_counter() - started)
            for name, text in (("mixed", mixed), ("ocr", ocr)):
                scores[name].append(f1(text.replace("#", " ").split(), truth))
    print("| path | pages | median s a page | word F1 (mean) | word F1 (lowest) |")
    print("|---|---|---|---|---|")
    for name in ("mixed", "ocr"):
        print(f"| {name} | {args.pages} | {statistics.median(times[name]):.3f} | "
              f"{statistics.fmean(scores[name]):.4f} | {min(scores[name]):.4f} |")


if __name__ == "__main__":
    main()
