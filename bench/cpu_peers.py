"""ocrq's CPU engine against Tesseract 5, on the corpus of bench/cpu_corpus.py, side by side in one run.

Accuracy and seconds a page: every page is rendered as the worker renders it (capped at 1540 px) and read by
both, interleaved page by page (which goes first alternates), one process each. Tesseract is Debian's
`tesseract-ocr` with the page's own language pack (its best case: ocrq is not told the language), `--psm 1`
(automatic layout with orientation detection), OMP_THREAD_LIMIT=1; ocrq's engine runs as a worker runs it.
CER is order-sensitive (edits / truth characters, whitespace ignored, list bullets dropped); ocrq's markdown
is turned into the text a user gets for `output=text`. Tables: groups x {ocrq, Tesseract} x {CER, s/page}.

Throughput (--serve): the same pages through `ocrq serve` as a user runs it (one upload per page), against
Tesseract with one process per core on the same rendered pages, one after the other in the same run.

    apt-get install tesseract-ocr tesseract-ocr-{chi-sim,jpn,fra,deu,spa,ita,nld,por,swe,dan}
    .venv/bin/python bench/cpu_corpus.py --out /tmp/corpus
    .venv/bin/python bench/cpu_peers.py --corpus /tmp/corpus [--limit 40] [--groups de,zh] [--no-tesseract]
            [--variant '{"Det.unclip_ratio": 1.6}' --variant '{"runtime": "onnxruntime"}' ...] [--jsonl pages.jsonl]
    .venv/bin/python bench/cpu_peers.py --corpus /tmp/corpus --serve [--limit 60] [--page-workers 1] [--threads 2]
            [--env OCRQ_CPU_INT8=true]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.documents import Limits, render_page  # noqa: E402
from common.formats.plain import markdown_to_text  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402
from tests.support.text import levenshtein, normalise  # noqa: E402
from worker.engines.cascade import CONFIRM_BELOW, DENSE_ABOVE  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402
from worker.engines.reading_order import PARAMS, Params  # noqa: E402

TESSERACT_LANG = {"en": "eng", "fr": "fra", "de": "deu", "es": "spa", "it": "ita", "nl": "nld", "pt": "por",
                  "sv": "swe", "da": "dan", "zh": "chi_sim", "ja": "jpn"}
_BULLET = re.compile(r"^\s*[•·‣▪◦●○■□–—*-]\s+", re.MULTILINE)


def edits(truth: str, text: str) -> tuple[int, int]:
    """(edits, truth characters), whitespace and list bullets ignored."""
    ref, hyp = normalise(_BULLET.sub("", truth)), normalise(_BULLET.sub("", text))
    return levenshtein(ref, hyp), max(len(ref), 1)


def tesseract(path: Path, lang: str, *, threads: int = 1, psm: str = "1") -> str:
    env = os.environ | {"OMP_THREAD_LIMIT": str(threads)}
    done = subprocess.run(["tesseract", str(path), "stdout", "-l", TESSERACT_LANG[lang], "--psm", psm],
                          capture_output=True, env=env, check=True)
    return done.stdout.decode("utf-8", "replace")


def select(corpus: Path, *, groups: list[str] | None, limit: int | None) -> list[dict]:
    pages = json.loads((corpus / "index.json").read_text())["pages"]
    if groups:
        pages = [p for p in pages if p["lang"] in groups or p["layout"] in groups or p["name"] in groups]
    if limit:
        # Spread over the corpus rather than its first pages (which are one language each, in turn).
        step = max(len(pages) / limit, 1)
        scans = [p for p in pages if p["group"] == "real scan"]
        pages = [pages[int(i * step)] for i in range(min(limit, len(pages)))]
        pages += [p for p in scans if p not in pages]  # the real scans always
    return pages


def rendered(corpus: Path, pages: list[dict], folder: Path) -> list[Path]:
    """Each page as the worker renders it, saved for Tesseract and for uploads."""
    limits, paths = Limits(), []
    for page in pages:
        path = folder / f"{page['name']}.png"
        render_page(corpus / f"{page['name']}.png", 0, limits=limits).image.save(path)
        paths.append(path)
    return paths


def side_by_side(corpus: Path, pages: list[dict], paths: list[Path], readers: dict[str, Callable],
                 jsonl: Path | None) -> list[dict]:
    """Every page read by every reader, in an order that rotates page by page."""
    rows = []
    out = jsonl.open("w") if jsonl else None
    names = list(readers)
    for n, (page, path) in enumerate(zip(pages, paths, strict=True)):
        truth = (corpus / f"{page['name']}.txt").read_text(encoding="utf-8")
        row = dict(page)
        for name in names[n % len(names):] + names[:n % len(names)]:
            started = time.perf_counter()
            text = readers[name](path, page["lang"])
            row[f"{name}_s"] = time.perf_counter() - started
            row[f"{name}_edits"], row["chars"] = edits(truth, text)
        rows.append(row)
        print(f"{page['name']:>10} " + " ".join(f"{name} {row[f'{name}_edits'] / row['chars']:.3f} "
                                               f"{row[f'{name}_s']:.1f}s" for name in names),
              file=sys.stderr, flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
    return rows


def engine_for(variant: dict, *, threads: int) -> CpuEngine:
    """The engine a --variant describes: its CpuEngine keys taken out, the rest rapidocr's settings."""
    params = dict(variant)
    return CpuEngine(threads=threads, reread=params.pop("reread", True), show_through=params.pop("show_through", True),
                     split=params.pop("split", True), runtime=params.pop("runtime", "openvino"),
                     quantised=params.pop("quantised", False), fast=params.pop("fast", True),
                     confirm_below=params.pop("confirm_below", CONFIRM_BELOW),
                     confirm_denser=params.pop("confirm_denser", DENSE_ABOVE),
                     order=Params(steps=PARAMS.steps - set(params.pop("off", []))), params_override=params)


def ocrq_reader(engine: CpuEngine) -> Callable:
    from PIL import Image

    def read(path: Path, lang: str) -> str:
        [result] = engine.read([Image.open(path).convert("RGB")])
        return markdown_to_text(getattr(result, "text", ""))
    return read


def groups_of(row: dict) -> list[str]:
    if row["group"] == "real scan":
        return ["real scan: " + row["name"]]
    out = [f"lang {row['lang']}", f"layout {row['layout']}" + (f" {row['columns']}" if row["columns"] > 1 else "")]
    out.append("degraded" if row["degraded"] else "clean")
    if row["turn"]:
        out.append(f"turned {row['turn']}")
    if row["tilt"]:
        out.append("tilted")
    return out


def table(rows: list[dict], readers: list[str]) -> str:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        for group in groups_of(row):
            grouped.setdefault(group, []).append(row)
    grouped["all"] = rows
    head = "| group | pages |" + "".join(f" {r} CER | {r} median | {r} s/page |" for r in readers)
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in sorted(grouped, key=lambda g: (g == "all", g)):
        group = grouped[name]
        chars = sum(r["chars"] for r in group)
        cells = [name, str(len(group))]
        for who in readers:
            cells += [f"{sum(r[f'{who}_edits'] for r in group) / chars:.4f}",
                      f"{statistics.median(r[f'{who}_edits'] / r['chars'] for r in group):.4f}",
                      f"{statistics.mean(r[f'{who}_s'] for r in group):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    clean = [r for r in rows if not r["degraded"]]
    for who in readers:
        worst = max(clean, key=lambda r: r[f"{who}_edits"] / r["chars"], default=None)
        if worst:
            rate = worst[f"{who}_edits"] / worst["chars"]
            lines.append(f"\nworst clean page ({who}): {worst['name']} CER {rate:.4f}; "
                         f"clean pages over 0.05: {sum(r[f'{who}_edits'] / r['chars'] > 0.05 for r in clean)}")
    return "\n".join(lines)


def throughput(pages: list[dict], paths: list[Path], folder: Path, *, cores: int, page_workers: int | None = None,
               threads: int = 0, env: dict[str, str] | None = None) -> str:
    """Pages/s through `ocrq serve` (one upload a page), then Tesseract with one process per core."""
    env = dict(env or {})
    env |= {"OCRQ_SERVE_PAGE_WORKERS": str(page_workers)} if page_workers is not None else {}
    env |= {"OCRQ_CPU_THREADS": str(threads)} if threads else {}
    with EmbeddedServer(folder / "home", extra_env=env) as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
        started = time.perf_counter()
        ids = []
        for path in paths:
            with path.open("rb") as body:
                ids.append(client.post("/jobs", files={"file": (path.name, body)}).raise_for_status().json()["id"])
        for job_id in ids:
            while client.get(f"/jobs/{job_id}").json()["status"] not in ("succeeded", "failed", "canceled"):
                time.sleep(0.5)
        served = time.perf_counter() - started
    started = time.perf_counter()
    with ThreadPoolExecutor(cores) as pool:
        list(pool.map(lambda pair: tesseract(pair[1], pair[0]["lang"]), zip(pages, paths, strict=True)))
    tess = time.perf_counter() - started
    n = len(paths)
    return ("| pages | ocrq serve s | ocrq pages/s | Tesseract x{c} s | Tesseract pages/s | ratio |\n"
            "|---|---|---|---|---|---|\n"
            f"| {n} | {served:.1f} | {n / served:.3f} | {tess:.1f} | {n / tess:.3f} | {tess / served:.2f} |"
            ).format(c=cores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--groups", help="comma-separated languages, layouts or page names")
    parser.add_argument("--no-tesseract", action="store_true")
    parser.add_argument("--variant", action="append", help="rapidocr settings as JSON, e.g. "
                        "'{\"Det.unclip_ratio\": 1.6}' (\"reread\": false turns the re-read off, \"quantised\": true "
                        "the int8 recogniser, \"fast\": false the small recogniser alone at rapidocr's detection size); "
                        "each one is another reader (ocrq, ocrq1, ...)")
    parser.add_argument("--threads", type=int, default=0,
                        help="the engine's threads (0: as the worker runs it; with --serve, OCRQ_CPU_THREADS)")
    parser.add_argument("--jsonl", type=Path, help="write each page's figures here")
    parser.add_argument("--serve", action="store_true", help="pages/s through `ocrq serve` against Tesseract")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--page-workers", type=int, help="--serve: OCRQ_SERVE_PAGE_WORKERS (default: serve's own)")
    parser.add_argument("--env", action="append", default=[], help="--serve: a setting for `ocrq serve`, "
                        "e.g. OCRQ_CPU_INT8=true")
    parser.add_argument("--table-from", type=Path, help="print the tables of a --jsonl file written earlier")
    args = parser.parse_args()
    if args.table_from:
        rows = [json.loads(line) for line in args.table_from.read_text().splitlines()]
        print(f"pages: {len(rows)}")
        print(table(rows, [key[:-2] for key in rows[0] if key.endswith("_s") and key != "chars_s"]))
        return
    pages = select(args.corpus, groups=args.groups.split(",") if args.groups else None, limit=args.limit)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        paths = rendered(args.corpus, pages, folder)
        if args.serve:
            print(throughput(pages, paths, folder, cores=args.cores, page_workers=args.page_workers,
                             threads=args.threads, env=dict(item.split("=", 1) for item in args.env)))
            return
        readers = {}
        for n, variant in enumerate(args.variant or ["{}"]):
            readers[f"ocrq{n or ''}"] = ocrq_reader(engine_for(json.loads(variant), threads=args.threads))
        if not args.no_tesseract:
            readers["tess"] = tesseract
        rows = side_by_side(args.corpus, pages, paths, readers, jsonl=args.jsonl)
    for n, variant in enumerate(args.variant or ["{}"]):
        print(f"ocrq{n or ''}: {variant}")
    print(f"pages: {len(rows)}")
    print(table(rows, list(readers)))


if __name__ == "__main__":
    main()
