"""Where a CPU engine page's time goes (orientation, detection, recognition, re-reads), for engine variants read
side by side, page by page, on pages of bench/cpu_corpus.py rendered as the worker renders them.

    .venv/bin/python bench/cpu_time_split.py --corpus /tmp/corpus35 --pages 24 \
        --variant '{}' --variant '{"threads": 1}' --variant '{"runtime": "onnxruntime"}' \
        --variant '{"Rec.rec_batch_num": 16}'

A variant is JSON: "threads" and the keys bench/cpu_peers.py's --variant takes go to CpuEngine, the rest to
rapidocr as settings. Seconds are sums over the pages.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_peers import engine_for  # noqa: E402
from common.documents import Limits, render_page  # noqa: E402


class _Timed:
    """rapidocr's reader, keeping the per-stage seconds (detection, classifier, recognition) of each call."""

    def __init__(self, ocr) -> None:
        self.ocr, self.calls = ocr, []

    def __call__(self, *args, **kwargs):
        output = self.ocr(*args, **kwargs)
        self.calls.append([seconds or 0.0 for seconds in output.elapse_list])
        return output

    def __getattr__(self, name):
        return getattr(self.ocr, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=24, help="pages spread evenly over the corpus")
    parser.add_argument("--variant", action="append", default=[])
    args = parser.parse_args()
    index = json.loads((args.corpus / "index.json").read_text())
    pages = index if isinstance(index, list) else index["pages"]
    pages = pages[::max(1, len(pages) // args.pages)][:args.pages]
    images = [render_page(args.corpus / f"{page['name']}.png", 0, limits=Limits()).image for page in pages]
    variants = args.variant or ["{}"]
    engines = []
    for variant in variants:
        params = json.loads(variant)
        threads = params.pop("threads", 0)
        engine = engine_for(params, threads=threads)
        engine._ocr = _Timed(engine._ocr)
        engine.read(images[:1])  # warm-up
        engines.append(engine)
    sums = [dict.fromkeys(("total", "orientation", "detection", "recognition", "reread"), 0.0) for _ in engines]
    for image in images:
        for engine, total in zip(engines, sums, strict=True):
            engine._ocr.calls = []
            started = time.perf_counter()
            [page] = engine.read([image])
            total["total"] += time.perf_counter() - started
            total["orientation"] += page.details["orientation_s"]
            total["reread"] += page.details["reread_s"]
            total["detection"] += sum(call[0] for call in engine._ocr.calls)
            total["recognition"] += sum(call[2] for call in engine._ocr.calls)
    print(f"pages: {len(images)}")
    print("| variant | total s | s/page | orientation | detection | recognition | re-reads |")
    print("|---|---|---|---|---|---|---|")
    for variant, total in zip(variants, sums, strict=True):
        print(f"| `{variant}` | {total['total']:.2f} | {total['total'] / len(images):.3f} | {total['orientation']:.2f} "
              f"| {total['detection']:.2f} | {total['recognition']:.2f} | {total['reread']:.2f} |")


if __name__ == "__main__":
    main()
