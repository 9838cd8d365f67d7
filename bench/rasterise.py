"""Time page rasterisation at the 1540 px longest side: text PDFs, scan PDFs and images.

Usage: .venv/bin/python -m bench.rasterise [--runs 5] [--pages 20]
Prints a markdown table of median milliseconds per page, in-process and isolated (render_page,
which forks a child per page), plus what the isolation itself costs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from common.documents import Limits, images, pdf, render_page
from common.documents.isolation import run_isolated
from common.documents.kinds import sniff_file
from tests.documents import hostile

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "samples"
LIMITS = Limits()
LOREM = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair. "
)


def corpus(folder: Path, pages: int) -> list[tuple[str, str, Path]]:
    """(name, class, path) of each benchmarked document, written into folder."""
    linn = Image.open(SAMPLES / "linn.png")
    rgb_scan = folder / "linn-rgb.pdf"
    linn.convert("RGB").save(rgb_scan, "PDF", save_all=True, append_images=[linn.convert("RGB")] * (pages - 1),
                             resolution=300)
    mono_scan = folder / "linn-1bit.pdf"
    linn.convert("1").save(mono_scan, "PDF", save_all=True, append_images=[linn.convert("1")] * (pages - 1),
                           resolution=300)
    photo = folder / "photo.jpg"
    hostile.big_jpeg(photo, size=(4000, 3000))
    return [
        ("vector text, Letter, ~3,000 chars/page", "text PDF",
         hostile.text_pdf(folder / "text.pdf", [LOREM * 8] * pages)),
        ("vector text, A4, ~3,000 chars/page", "text PDF",
         hostile.text_pdf(folder / "text-a4.pdf", [LOREM * 8] * pages, page_size=hostile.A4_PT)),
        ("c03-29.pdf (770×995 JPEG scan)", "scan PDF", SAMPLES / "c03-29.pdf"),
        ("linn.png as 300 DPI colour JPEG scan", "scan PDF", rgb_scan),
        ("linn.png as 300 DPI 1-bit scan", "scan PDF", mono_scan),
        ("linn.png (2550×3300 palette PNG)", "image", SAMPLES / "linn.png"),
        ("4000×3000 JPEG photo", "image", photo),
    ]


def page_count(path: Path, kind: str) -> int:
    if kind == "pdf":
        with pdf.open_pdf(path) as document:
            return len(document)
    with images.open_image(path, kind) as image:
        return images.page_count(image, kind)


def in_process(path: Path, kind: str, index: int) -> Image.Image:
    if kind == "pdf":
        return pdf.render_pdf_page(path, index, limits=LIMITS)
    return images.render_image_page(path, kind, index, limits=LIMITS)


def median_ms(fn: Callable[[], object], *, runs: int) -> tuple[float, object]:
    fn()  # warm-up
    samples, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, result


def measure(path: Path, *, runs: int) -> tuple[int, tuple[int, int], float, float]:
    kind = sniff_file(path)
    count = page_count(path, kind)
    runs = max(runs, -(-20 // count))  # at least 20 timings per document
    inside, isolated, size = [], [], None
    for index in range(count):
        ms, image = median_ms(lambda: in_process(path, kind, index), runs=runs)
        inside.append(ms)
        size = image.size
        isolated.append(median_ms(lambda: render_page(path, index, limits=LIMITS), runs=runs)[0])
    return count, size, statistics.median(inside), statistics.median(isolated)


def isolation_costs(*, runs: int) -> list[tuple[str, float]]:
    fork = median_ms(lambda: run_isolated(int, timeout_s=10, max_pixels=1, what="nothing"), runs=runs * 5)[0]
    spawn = median_ms(
        lambda: subprocess.run([sys.executable, "-c", "import pypdfium2, PIL.Image"], check=True), runs=runs
    )[0]
    return [
        ("fork a child that returns at once (what render_page adds, before copying pixels)", fork),
        ("spawn an interpreter that imports pypdfium2 and Pillow (the alternative)", spawn),
    ]


def machine() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {model}; load average {load} at start"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per page, 20 per document at least")
    parser.add_argument("--pages", type=int, default=20, help="pages in each generated PDF")
    args = parser.parse_args()
    print(f"Machine: {machine()}")
    print(f"Python {platform.python_version()}, pypdfium2 {pdf.pdfium.PYPDFIUM_INFO}, Pillow {Image.__version__}\n")
    print("| document | class | pages | rendered px | in-process ms/page | render_page ms/page |")
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name, klass, path in corpus(Path(folder), args.pages):
            count, size, inside, isolated = measure(path, runs=args.runs)
            print(f"| {name} | {klass} | {count} | {size[0]}×{size[1]} | {inside:.1f} | {isolated:.1f} |")
    print("\n| isolation cost | ms |")
    print("|---|---:|")
    for name, ms in isolation_costs(runs=args.runs):
        print(f"| {name} | {ms:.1f} |")


if __name__ == "__main__":
    main()
