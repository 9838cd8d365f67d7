"""What a searchable PDF result costs per page, beside a markdown result of the same pages.

Usage: .venv/bin/python -m bench.pdf_results [--pages 8] [--runs 3]
Draws one-column pages (1190x1540 px, a title and 14 lines), reads each with the CPU engine (text and
blocks with line boxes), then times, per page, in one process and one run:
  - markdown result: assembling the job's markdown (common.jobs.results.render);
  - PDF result, CPU engine: the PDF built from the engine's lines (build_pdf over the whole document, and
    over its first page alone: the fixed cost of a document, mostly the layer's fonts);
  - PDF result, vLLM path: rapidocr's detector alone on the rendered page plus the word placement,
    which is the CPU work the worker adds to a vLLM page of a job that asked for a PDF.
Prints a markdown table of medians over the runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from common.documents import Limits
from common.jobs import results
from common.pdf_output import Line, PageLayer, build_pdf
from tests.support.pdf_checks import draw_page
from worker.engines.cpu import CpuEngine
from worker.engines.line_boxes import LineDetector

LINES = ["The invoice is due within thirty days of delivery.", "La facture est payable à réception.",
         "Die Rechnung ist binnen vierzehn Tagen fällig.", "Fakturaen forfalder inden for tredive dage.",
         "De factuur moet binnen dertig dagen worden betaald.", "A fatura vence em trinta dias após a entrega.",
         "La fattura è pagabile entro trenta giorni."]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pages = [draw_page(f"Statement {n + 1}", [LINES + LINES[::-1]]) for n in range(args.pages)]
    engine, detector = CpuEngine(), LineDetector()

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "doc.pdf"
        first, *rest = [p.image for p in pages]
        first.save(source, "PDF", save_all=True, append_images=rest, resolution=140.0)
        timings: dict[str, list[float]] = {k: [] for k in ("read", "markdown", "pdf", "pdf_one", "detector")}
        for _ in range(args.runs):
            started = time.perf_counter()
            read = engine.read([p.image for p in pages])
            timings["read"].append((time.perf_counter() - started) / len(pages))
            rows = [SimpleNamespace(index=n, status="succeeded", text=r.text, error=None)
                    for n, r in enumerate(read)]
            started = time.perf_counter()
            results.render(SimpleNamespace(id="bench", status="succeeded", meta=None), rows, "markdown")
            timings["markdown"].append((time.perf_counter() - started) / len(pages))
            layers = [PageLayer(index=n, width=p.image.width, height=p.image.height, rotation=r.rotation,
                                lines=[Line(ln["text"], tuple(ln["box"])) for b in r.blocks for ln in b["lines"]])
                      for n, (p, r) in enumerate(zip(pages, read, strict=True))]
            started = time.perf_counter()
            body = build_pdf(source, layers, limits=Limits())
            timings["pdf"].append((time.perf_counter() - started) / len(pages))
            started = time.perf_counter()
            build_pdf(source, layers[:1], limits=Limits())
            timings["pdf_one"].append(time.perf_counter() - started)
            started = time.perf_counter()
            for p, row in zip(pages, rows, strict=True):
                detector.text_layer(p.image, row.text)
            timings["detector"].append((time.perf_counter() - started) / len(pages))
    med = {k: statistics.median(v) for k, v in timings.items()}
    print(f"{args.pages} pages x {args.runs} runs, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; PDF {len(body) / 1024:.0f} KiB")
    print("| per page (median) | markdown result | PDF result |")
    print("|---|---|---|")
    print(f"| CPU engine read (rapidocr) | {med['read']:.2f} s | {med['read']:.2f} s |")
    print(f"| assembling the result | {med['markdown'] * 1000:.2f} ms | {med['pdf'] * 1000:.0f} ms |")
    print(f"| CPU engine, total | {med['read'] + med['markdown']:.2f} s | {med['read'] + med['pdf']:.2f} s "
          f"(x{(med['read'] + med['pdf']) / (med['read'] + med['markdown']):.2f}) |")
    print(f"| vLLM path, CPU work added per page (detector + placement) | 0 | {med['detector']:.2f} s |")
    print(f"| vLLM path, assembling the result | {med['markdown'] * 1000:.2f} ms | {med['pdf'] * 1000:.0f} ms |")
    print(f"| a one-page document's PDF (the fixed cost) | | {med['pdf_one'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
