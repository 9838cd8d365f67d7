"""Office files and web pages through ocrq's conversion (common.documents.office.convert_to_pdf: LibreOffice
headless in a network namespace of its own, a fresh profile each time, as a worker runs it): seconds a page.

Each kind is written at a few sizes (DOCX by python-docx, XLSX by openpyxl, PPTX by python-pptx, ODT by LibreOffice
from the DOCX, HTML by hand), each converted --repeat times; the figure is the median of the runs' seconds divided
by the PDF's pages, for each file, and the conversion's fixed start (LibreOffice's own) shows as the one-page cost.

    .venv/bin/python bench/office_conversion.py --sizes 1 10 50 --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docx
import openpyxl
import pptx
from openpyxl.worksheet.pagebreak import Break

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.documents import office  # noqa: E402

PARAGRAPH = ("The harbour authority opened the northern quay in the spring of that year, after a winter of storms had "
             "closed the old landing twice; fishing boats moved first, then the ferries, and by midsummer the market "
             "had followed them along the shore.")


def write_docx(path: Path, pages: int) -> Path:
    document = docx.Document()
    for page in range(pages):
        document.add_heading(f"Section {page + 1}", level=1)
        for _ in range(6):
            document.add_paragraph(PARAGRAPH)
        if page < pages - 1:
            document.add_page_break()
    document.save(path)
    return path


def write_xlsx(path: Path, pages: int) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, 40 * pages + 1):
        sheet.append([f"Item {row}", row * 3, row * 7 % 101, "granite" if row % 2 else "timber"])
        if row % 40 == 0 and row < 40 * pages:
            sheet.row_breaks.append(Break(id=row))
    book.save(path)
    return path


def write_pptx(path: Path, pages: int) -> Path:
    deck = pptx.Presentation()
    for page in range(pages):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Tide tables, week {page + 1}"
        slide.placeholders[1].text = "High water comes at dawn.\nLow water at noon.\nThe ferry waits for the tide."
    deck.save(path)
    return path


def write_odt(path: Path, pages: int) -> Path:
    source = write_docx(path.with_suffix(".docx"), pages)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([shutil.which("soffice"), "--headless", "--norestore",
                        f"-env:UserInstallation={Path(profile).as_uri()}", "--convert-to", "odt", "--outdir",
                        str(path.parent), str(source)], check=True, capture_output=True, timeout=300)
    return path


def write_html(path: Path, pages: int) -> Path:
    body = "".join(f"<h2>Section {page + 1}</h2>" + f"<p>{PARAGRAPH}</p>" * 6 + '<p style="page-break-after: always">'
                   "</p>" for page in range(pages))
    path.write_text(f"<!DOCTYPE html><html><body><h1>Notices</h1>{body}</body></html>")
    return path


WRITERS = {"docx": write_docx, "xlsx": write_xlsx, "pptx": write_pptx, "odt": write_odt, "html": write_html}


def page_count(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in info.splitlines() if line.startswith("Pages:")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", default=list(WRITERS))
    args = parser.parse_args()
    print("| kind | pages | median s | s a page | runs |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="ocrq-bench-office-") as tmp:
        for kind in args.kinds:
            for size in args.sizes:
                source = WRITERS[kind](Path(tmp) / f"{kind}-{size}.{kind}", size)
                seconds, pages = [], 0
                for run in range(args.repeat):
                    work = Path(tmp) / f"work-{kind}-{size}-{run}"
                    work.mkdir()
                    started = time.perf_counter()
                    pdf = office.convert_to_pdf(source, kind, work, timeout_s=600, max_pages=10_000)
                    seconds.append(time.perf_counter() - started)
                    pages = page_count(pdf)
                    shutil.rmtree(work)
                median = statistics.median(seconds)
                print(f"| {kind} | {pages} | {median:.2f} | {median / pages:.3f} | "
                      f"{', '.join(f'{s:.2f}' for s in seconds)} |", flush=True)


if __name__ == "__main__":
    main()
