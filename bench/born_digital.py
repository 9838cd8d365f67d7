"""Born-digital PDFs through `ocrq serve` (the embedded default, CPU engine): ocr=auto (pages read from their own
text) against ocr=always (every page OCR'd, the behaviour before), and both against pdftotext, in one run.

The document: N pages typeset by reportlab, alternating one column of prose and a title over two columns, in
Times, Helvetica and Courier at 9-12 pt, sentences drawn from a seeded generator. Words are compared as
multisets (F1) against `pdftotext -layout`; the order against the document's own line order (the generator's
truth: column by column) as the share of lines found in order.

    .venv/bin/python bench/born_digital.py --pages 100 --always-pages 10
(ocr=always on a 100-page document takes minutes on 2 cores: --always-pages times it on the first pages, and
the pages-a-second figures are compared.)

Real files others made (the PDF manuals Debian's doc packages ship): --pdf FILE, once a file; each is read with
ocr=auto whole and ocr=always on its first --always-pages pages, words against pdftotext -layout's for those pages.

    .venv/bin/python bench/born_digital.py --pdf /usr/share/doc/libtasn1-doc/libtasn1.pdf --always-pages 5
"""

from __future__ import annotations

import argparse
import html
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.embedded import EmbeddedServer  # noqa: E402

NOUNS = "harbour quay ledger cargo tide rope anchor hull mast sail dock crane barrel ticket customs pilot".split()
VERBS = "carried lifted counted weighed sealed loaded signed measured stored checked".split()
OTHERS = "the of and with before after under every each old new heavy early late".split()
FONTS = [("Times-Roman", 11), ("Helvetica", 10), ("Courier", 9), ("Times-Roman", 12), ("Helvetica", 9)]


def sentence(rng: random.Random, width: int) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < width:
        words.append(rng.choice(NOUNS if len(words) % 3 == 0 else VERBS if len(words) % 3 == 1 else OTHERS))
    return " ".join(words)[:width].rsplit(" ", 1)[0]


def make_document(path: Path, pages: int, seed: int = 7) -> list[list[str]]:
    """The PDF, and each page's lines in reading order."""
    rng = random.Random(seed)
    c = canvas.Canvas(str(path), pagesize=A4)
    truth = []
    for n in range(pages):
        font, size = FONTS[n % len(FONTS)]
        lines = []
        if n % 2 == 0:
            c.setFont(font, size)
            for i in range(40):
                text = sentence(rng, 80 if font != "Courier" else 70)
                c.drawString(60, 790 - i * (size + 5), text)
                lines.append(text)
        else:
            c.setFont("Helvetica-Bold", 18)
            title = f"Section {n + 1} {rng.choice(NOUNS).title()} Records"
            c.drawString(60, 790, title)
            lines.append(title)
            c.setFont(font, size)
            for x in (60, 310):
                for i in range(36):
                    text = sentence(rng, 38 if font != "Courier" else 34)
                    c.drawString(x, 750 - i * (size + 5), text)
                    lines.append(text)
        truth.append(lines)
        c.showPage()
    c.save()
    return truth


_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)
_TABLE_TAG = re.compile(r"</?(table|thead|tbody|tr|th|td)( [^>]*)?>")


def words(markdown: str) -> list[str]:
    """A result's words: heading marks, code fences and a table's tags are markdown's, not the page's (a cell's
    text is HTML-escaped)."""
    text = html.unescape(_TABLE_TAG.sub(" ", markdown)) if "<table" in markdown else markdown
    return [w for w in _HEADING.sub("", text).split() if w != "```"]


def f1(ours: list[str], theirs: list[str]) -> float:
    common = sum((Counter(ours) & Counter(theirs)).values())
    return 2 * common / (len(ours) + len(theirs)) if ours or theirs else 1.0


def in_order(text: str, lines: list[str]) -> float:
    """The share of the page's lines found in the text in their order."""
    flat, at, found = " ".join(text.replace("#", " ").split()), 0, 0
    for line in lines:
        hit = flat.find(line, at)
        if hit >= 0:
            found, at = found + 1, hit + len(line)
    return found / len(lines)


_LINE_END_HYPHEN = re.compile(r"(?<=[^\W\d_])-\s+(?=[^\W\d_])")


def in_order_loose(text: str, lines: list[str]) -> float:
    """in_order with markdown's marks out (a heading's `#`, not `#1`) and the line breaks' out of both sides: spaces dropped (pdftotext reads "L A TEX",
    "LATEX 2ε" and "2 256" where we read them otherwise), a word broken at a line's end by a hyphen made whole in
    ours ("stan- dard", as -layout prints it) and its hyphen dropped from a reference line's end (-raw prints it,
    reading mode joins the word)."""
    def bare(s: str) -> str:
        return "".join(s.split())

    flat = bare(_LINE_END_HYPHEN.sub("", " ".join(w for w in _HEADING.sub("", text).split() if w != "```")))
    at = found = 0
    for line in lines:
        line = bare(line[:-1] if line.endswith("-") else line)
        hit = flat.find(line, at)
        if hit >= 0:
            found, at = found + 1, hit + len(line)
    return found / len(lines)


def run_job(client: httpx.Client, pdf: Path, *, ocr: str, pages: str | None) -> tuple[float, dict]:
    started = time.perf_counter()
    data = {"ocr": ocr} | ({"pages": pages} if pages else {})
    job_id = client.post("/jobs", files={"file": (pdf.name, pdf.read_bytes())}, data=data).raise_for_status().json()["id"]
    while (job := client.get(f"/jobs/{job_id}").json())["status"] not in ("succeeded", "failed"):
        time.sleep(0.1)
    elapsed = time.perf_counter() - started
    result = client.get(f"/jobs/{job_id}/result", params={"format": "json"}).json()
    return elapsed, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--always-pages", type=int, default=10)
    parser.add_argument("--pdf", type=Path, action="append", help="a real PDF instead of the generated one")
    args = parser.parse_args()
    if args.pdf:
        real_files(args.pdf, always_pages=args.always_pages)
        return
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        pdf = folder / "doc.pdf"
        truth = make_document(pdf, args.pages)
        started = time.perf_counter()
        reference = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                                   check=True).stdout
        pdftotext_s = time.perf_counter() - started
        with EmbeddedServer(folder / "home") as server:
            client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
            auto_s, auto = run_job(client, pdf, ocr="auto", pages=None)
            always_s, always = run_job(client, pdf, ocr="always", pages=f"1-{args.always_pages}")
    rows = []
    for name, seconds, result, count in (("auto", auto_s, auto, args.pages),
                                         ("always", always_s, always, args.always_pages)):
        pages = result["pages"]
        text = "\n\n".join(p["text"] or "" for p in pages)
        ref_pages = reference.split("\f")[:count]
        sources = Counter(p["source"] for p in pages)
        order = sum(in_order(p["text"] or "", truth[p["page"] - 1]) for p in pages) / len(pages)
        rows.append((name, count, seconds, count / seconds, f1(words(text),
                                                              " ".join(ref_pages).split()), order, dict(sources)))
    print(f"pdftotext -layout: {args.pages} pages in {pdftotext_s:.2f} s ({args.pages / pdftotext_s:.0f} pages/s)")
    print("| ocr | pages | s | pages/s | word F1 vs pdftotext | lines in order | sources |")
    print("|---|---|---|---|---|---|---|")
    for name, count, seconds, rate, score, order, sources in rows:
        print(f"| {name} | {count} | {seconds:.2f} | {rate:.2f} | {score:.4f} | {order:.3f} | {sources} |")
    print(f"auto / always pages a second: {rows[0][3] / rows[1][3]:.1f}x")


def real_files(pdfs: list[Path], *, always_pages: int) -> None:
    # Lines in order: exact against reading mode / loose (in_order_loose) against reading mode / loose against -raw.
    print("| file | ocr | pages | s | pages/s | word F1 vs pdftotext -layout | lines in order: reading exact / "
          "reading loose / raw loose | sources | pdftotext pages/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, EmbeddedServer(Path(tmp) / "home") as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
        for pdf in pdfs:
            started = time.perf_counter()
            reference = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                                       check=True).stdout.split("\f")
            pdftotext_s = time.perf_counter() - started
            # Lines of three words or more in pdftotext's reading mode (-layout sets columns side by side), and in
            # -raw, the order the PDF draws them: a TeX paper's two columns one after the other, where reading
            # mode goes back and forth between them paragraph by paragraph (ieeepes_doc.pdf, apssamp.pdf).
            ordered, drawn = ([[ln for ln in page.splitlines() if len(ln.split()) >= 3] for page in subprocess.run(
                ["pdftotext", *mode, str(pdf), "-"], capture_output=True, text=True, check=True).stdout.split("\f")]
                for mode in ([], ["-raw"]))
            for ocr, spec in (("auto", None), ("always", f"1-{always_pages}")):
                seconds, result = run_job(client, pdf, ocr=ocr, pages=spec)
                pages = result["pages"]
                ours = words("\n\n".join(p["text"] or "" for p in pages))
                theirs = " ".join(reference[p["page"] - 1] for p in pages).split()
                sources = dict(Counter(p["source"] for p in pages))
                orders = []
                for match, reference_lines in ((in_order, ordered), (in_order_loose, ordered),
                                               (in_order_loose, drawn)):
                    scored = [p for p in pages if reference_lines[p["page"] - 1]]
                    orders.append(sum(match(p["text"] or "", reference_lines[p["page"] - 1]) for p in scored)
                                  / max(len(scored), 1))
                print(f"| {pdf.name} | {ocr} | {len(pages)} | {seconds:.2f} | {len(pages) / seconds:.2f} | "
                      f"{f1(ours, theirs):.4f} | {' / '.join(f'{o:.3f}' for o in orders)} | {sources} | "
                      f"{(len(reference) - 1) / pdftotext_s:.0f} |")


if __name__ == "__main__":
    main()
