"""The CPU engine on bench/layout_corpus.py's pages, scored fairly (issue 56): beside the order-sensitive CER, an
order-free CER (words sorted), a word error rate with spaces kept, a reading-order score (Kendall's tau over the
truth's parts found in the reading), F1 for headings, list items and table cells (markdown kinds against the
generator's) and the table pages whose heading is kept outside the table.

Tesseract 5 reads the same pages in the same run, one reader per --psm: OMP_THREAD_LIMIT=1, the page's language,
--dpi the page's own; psm 1 is its automatic layout with the orientation check, psm 3 the same without, and
"tess best psm" takes for each kind the psm of 3, 4 and 6 with the lowest CER on these very pages (its best case).
Its plain text marks no headings and no tables (n/a); its list items are lines that start with a bullet or number.

    .venv/bin/python bench/layout_corpus.py --out /tmp/layouts
    .venv/bin/python bench/layout_scores.py --corpus /tmp/layouts [--jsonl pages.jsonl] [--psm 1,3,4,6]
            [--no-tesseract] [--kinds list,headings] [--off tables --off headings]
    .venv/bin/python bench/layout_scores.py --corpus /tmp/layouts --rescore pages.jsonl
    .venv/bin/python bench/layout_scores.py --corpus /tmp/layouts --ablate
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rapidfuzz import fuzz  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from common.formats.plain import markdown_to_text  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402
from worker.engines.reading_order import PARAMS, STEPS, Params  # noqa: E402


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def _words(text: str) -> list[str]:
    return unicodedata.normalize("NFKC", text).split()


def cer(truth: str, text: str) -> tuple[int, int]:
    """Edits and truth characters, whitespace ignored, in order."""
    return Levenshtein.distance(_squeeze(truth), _squeeze(text)), len(_squeeze(truth))


def order_free(truth: str, text: str) -> tuple[int, int]:
    """Edits and truth characters between the words of each, sorted: what is read, whatever the order."""
    a, b = "".join(sorted(_words(truth))), "".join(sorted(_words(text)))
    return Levenshtein.distance(a, b), len(a)


def wer(truth: str, text: str) -> tuple[int, int]:
    """Word edits and truth words, spaces kept: a line read with its spaces dropped is all edits."""
    a, b = _words(truth), _words(text)
    return Levenshtein.distance(a, b), len(a)


def kendall_tau(truth_units: list[str], text: str) -> float | None:
    """Kendall's tau between the truth's order of its runs of four words and where each is found in the reading
    (at 90 % or better; a run found twice counts once), or None with fewer than two found."""
    flat = " ".join(_words(text))
    found = []
    for unit in truth_units:
        words = _words(unit)
        for k in range(0, max(len(words) - 3, 1), 4):
            run = " ".join(words[k:k + 4])
            if len(run) < 8:
                continue  # a short cell ("1901") may be found anywhere
            match = fuzz.partial_ratio_alignment(run, flat, score_cutoff=90)
            if match is not None:
                found.append(match.dest_start)
    pairs = list(itertools.combinations(found, 2))
    if not pairs:
        return None
    return sum((b > a) - (b < a) for a, b in pairs) / len(pairs)


def f1(truth: list[str], read: list[str]) -> tuple[int, int, int]:
    """Matched, truth and read counts of one kind of part (text alike at 85 % or better)."""
    left = list(read)
    matched = 0
    for unit in truth:
        best = max(left, key=lambda r: fuzz.ratio(unit, r), default=None)
        if best is not None and fuzz.ratio(unit, best) >= 85:
            matched += 1
            left.remove(best)
    return matched, len(truth), len(read)


_ITEM = re.compile(r"^(?:[-*•·]|\d+[.)])\s+(.*)$")


def structure(markdown: str) -> dict[str, list[str] | None]:
    """The headings, list items and table cells of ocrq's markdown."""
    headings = [m.group(1) for m in re.finditer(r"^#+\s+(.*)$", markdown, re.M)]
    items = [m.group(1) for line in markdown.splitlines() if (m := _ITEM.match(line))]
    cells = [html.unescape(c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", markdown, re.S)]
    return {"heading": headings, "item": items, "cell": cells}


def plain_structure(text: str) -> dict[str, list[str] | None]:
    """The list items of a plain text (Tesseract's): a line that starts with a bullet or a number, with the lines
    under it up to a blank line or the next item. Plain text marks no headings and no tables (None)."""
    items: list[list[str]] = []
    for line in text.splitlines():
        if m := _ITEM.match(line.strip()):
            items.append([m.group(1)])
        elif line.strip() and items and items[-1]:
            items[-1].append(line.strip())
        elif items and items[-1]:
            items.append([])
    return {"heading": None, "item": [" ".join(i) for i in items if i], "cell": None}


def score(page: dict, text: str, *, markup: bool = True) -> dict:
    """A page's figures for one reading: `text` is markdown (ocrq's) or, with markup False, plain text."""
    units = page["units"]
    read = structure(text) if markup else plain_structure(text)
    markdown, text = text, markdown_to_text(text) if markup else text
    row = {"name": page["name"], "kind": page["kind"]}
    row["edits"], row["chars"] = cer(page["truth"], text)
    row["free_edits"], row["free_chars"] = order_free(page["truth"], text)
    row["word_edits"], row["words"] = wer(page["truth"], text)
    row["tau"] = kendall_tau([u["text"] for u in units], text)
    for kind in ("heading", "item"):
        row[kind] = None if read[kind] is None else f1(
            [re.sub(r"^(\d+[.)]|•)\s*", "", u["text"]) for u in units if u["kind"] == kind],
            [re.sub(r"^(\d+[.)]|•)\s*", "", r) for r in read[kind]])
    # Cells alike exactly (a "1901" read as "1907" is a wrong cell); on a page without a table every cell read
    # is a false one (a justified page read as a table).
    truth_cells = [u["text"] for u in units if u["kind"] == "cell"]
    if read["cell"] is None:
        row["cell"] = None
    else:
        left = list(read["cell"])
        matched = sum(1 for c in truth_cells if c in left and not left.remove(c))
        row["cell"] = (matched, len(truth_cells), len(read["cell"]))
    if page["kind"] == "table_heading" and markup:
        # The whole heading, not its first word: "Goods and Passengers" over a table with a "Goods" column.
        heading = next(u["text"] for u in units if u["kind"] == "heading")
        tables = " ".join(re.findall(r"<table>.*?</table>", markdown, re.S))
        outside = re.sub(r"<table>.*?</table>", "", markdown, flags=re.S)
        row["heading_outside_table"] = (fuzz.partial_ratio(heading, outside) >= 90
                                        and fuzz.partial_ratio(heading, markdown_to_text(tables)) < 90)
    return row


def table(rows: list[dict]) -> str:
    kinds = sorted({r["kind"] for r in rows})
    head = ("| kind | pages | CER | order-free CER | WER | Kendall tau | heading F1 | list-item F1 | table-cell F1 |\n"
            "|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for kind in [*kinds, "all"]:
        group = [r for r in rows if kind in ("all", r["kind"])]

        def rate(e: str, n: str, group: list[dict] = group) -> str:
            return f"{sum(r[e] for r in group) / max(sum(r[n] for r in group), 1):.4f}"

        def f(k: str, group: list[dict] = group) -> str:
            if any(row[k] is None for row in group):
                return "n/a"
            m, t, r = (sum(row[k][i] for row in group) for i in range(3))
            return "-" if t == 0 and r == 0 else f"{2 * m / max(t + r, 1):.2f}"

        taus = [r["tau"] for r in group if r["tau"] is not None]
        lines.append(f"| {kind} | {len(group)} | {rate('edits', 'chars')} | {rate('free_edits', 'free_chars')} | "
                     f"{rate('word_edits', 'words')} | {statistics.mean(taus) if taus else float('nan'):.3f} | "
                     f"{f('heading')} | {f('item')} | {f('cell')} |")
    kept = [r["heading_outside_table"] for r in rows if "heading_outside_table" in r]
    if kept:
        lines.append(f"\ntable pages with the heading kept outside the table: {sum(kept)} of {len(kept)}")
    dropped = [r["dropped_lines"] for r in rows if r.get("dropped_lines") is not None]
    if dropped:
        lines.append(f"pages with lines dropped: {sum(d > 0 for d in dropped)} of {len(dropped)}")
    return "\n".join(lines)


def cer_by_kind(by_reader: dict[str, list[dict]]) -> str:
    """Order-sensitive CER, kind by reader: one table to read the readers side by side."""
    names = list(by_reader)
    kinds = sorted({r["kind"] for rows in by_reader.values() for r in rows})
    lines = ["| kind | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for kind in [*kinds, "all"]:
        cells = []
        for name in names:
            group = [r for r in by_reader[name] if kind in ("all", r["kind"])]
            cells.append(f"{sum(r['edits'] for r in group) / max(sum(r['chars'] for r in group), 1):.4f}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_per_kind(by_reader: dict[str, list[dict]], names: list[str]) -> tuple[list[dict], dict[str, str]]:
    """Tesseract at its best psm for each kind (the lowest CER of the kind's pages, chosen on these pages: its
    best case)."""
    chosen, rows = {}, []
    for kind in sorted({r["kind"] for r in by_reader[names[0]]}):
        def rate(name: str, kind: str = kind) -> float:
            group = [r for r in by_reader[name] if r["kind"] == kind]
            return sum(r["edits"] for r in group) / max(sum(r["chars"] for r in group), 1)
        chosen[kind] = min(names, key=rate)
        rows += [r for r in by_reader[chosen[kind]] if r["kind"] == kind]
    return rows, chosen


def reading_once(engine: CpuEngine) -> CpuEngine:
    """The engine, its detector's and recogniser's readings of each page kept, so that a page reordered with
    other steps is not read again."""
    read, kept = engine._detect_and_read, {}

    def once(array):
        key = array.tobytes()[::997] + bytes(str(array.shape), "ascii")
        if key not in kept:
            kept[key] = read(array)
        return kept[key]

    engine._detect_and_read = once
    return engine


def ablation(corpus: Path, pages: list[dict]) -> str:
    """Each page read once (the detector's and recogniser's readings kept), then ordered with all steps and with
    each one switched off: the figures of all pages by step left out."""
    from PIL import Image

    engine = reading_once(CpuEngine())
    variants = {"(none)": PARAMS.steps, **{step: PARAMS.steps - {step} for step in STEPS}}
    rows: dict[str, list[dict]] = {name: [] for name in variants}
    for page in pages:
        image = Image.open(corpus / f"{page['name']}.png").convert("RGB")
        for name, steps in variants.items():
            engine._order = Params(steps=steps)
            [result] = engine.read([image])
            rows[name].append(score(page, getattr(result, "text", "")))
        kept.clear()
        print(f"{page['name']:>18} read {len(variants)} ways", file=sys.stderr, flush=True)
    lines = ["| step off | CER | order-free CER | WER | Kendall tau | heading F1 | list-item F1 | table-cell F1 | "
             "heading outside table |", "|---|---|---|---|---|---|---|---|---|"]
    for name, group in rows.items():
        last = table(group).split("\n")
        [row_all] = [ln for ln in last if ln.startswith("| all |")]
        kept_line = next((ln for ln in last if ln.startswith("table pages")), "")
        cells = row_all.strip("|").split("|")[2:]
        lines.append(f"| {name} |" + "|".join(cells) + f"| {kept_line.rsplit(': ', 1)[-1] if kept_line else '-'} |")
    return "\n".join(lines)


def tesseract(path: Path, *, lang: str, dpi: int, psm: str) -> str:
    """Debian's Tesseract 5 on one page: one thread (its own threads thrash a 2-core machine), the page's language
    and its real dpi."""
    done = subprocess.run(["tesseract", str(path), "stdout", "-l", TESSERACT_LANG[lang], "--dpi", str(dpi),
                           "--psm", psm], capture_output=True, text=True, check=True,
                          env=os.environ | {"OMP_THREAD_LIMIT": "1"})
    return done.stdout


TESSERACT_LANG = {"en": "eng", "fr": "fra", "de": "deu", "es": "spa", "it": "ita", "nl": "nld", "pt": "por",
                  "sv": "swe", "da": "dan", "zh": "chi_sim", "ja": "jpn"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--jsonl", type=Path)
    parser.add_argument("--psm", default="1,3,4,6", help="Tesseract's page segmentation modes to run, each a reader "
                        "(1: automatic with its orientation check, 3: automatic without, 4: one column, 6: one block)")
    parser.add_argument("--no-tesseract", action="store_true")
    parser.add_argument("--kinds", help="comma-separated kinds to read (default all)")
    parser.add_argument("--off", action="append", default=[], choices=STEPS,
                        help="switch off a step of the reading order (reading_order.STEPS), for an ablation")
    parser.add_argument("--ablate", action="store_true", help="read each page once, then order its lines again "
                        "with each step of the reading order switched off in turn: a table of each metric by step")
    parser.add_argument("--rescore", type=Path, help="score the readings of a --jsonl file written earlier again")
    args = parser.parse_args()
    from PIL import Image

    if args.rescore:
        index = {p["name"]: p for p in json.loads((args.corpus / "index.json").read_text())["pages"]}
        by_reader = {}
        for line in args.rescore.read_text().splitlines():
            old = json.loads(line)
            row = score(index[old["name"]], old["text"], markup=old["reader"] == "ocrq")
            by_reader.setdefault(old["reader"], []).append(row | {"dropped_lines": old.get("dropped_lines")})
        for name, rows in by_reader.items():
            print(f"\n### {name} ({len(rows)} pages)\n\n{table(rows)}")
        return

    index = json.loads((args.corpus / "index.json").read_text())
    pages = [p for p in index["pages"] if not args.kinds or p["kind"] in args.kinds.split(",")]
    if args.ablate:
        print(ablation(args.corpus, pages))
        return
    engine = CpuEngine(order=Params(steps=PARAMS.steps - set(args.off)))
    psms = [] if args.no_tesseract else args.psm.split(",")
    by_reader: dict[str, list[dict]] = {"ocrq": [], **{f"tess psm {p}": [] for p in psms}}
    seconds: dict[str, float] = dict.fromkeys(by_reader, 0.0)
    out = args.jsonl.open("w") if args.jsonl else None
    for page in pages:
        path = args.corpus / f"{page['name']}.png"
        started = time.perf_counter()
        [result] = engine.read([Image.open(path).convert("RGB")])
        seconds["ocrq"] += time.perf_counter() - started
        markdown = getattr(result, "text", "")
        row = score(page, markdown)
        row["dropped_lines"] = getattr(result, "details", {}).get("dropped_lines")
        row["reader"] = "ocrq"
        by_reader["ocrq"].append(row)
        written = [row | {"text": markdown}]
        for psm in psms:
            started = time.perf_counter()
            text = tesseract(path, lang=page.get("lang", "en"), dpi=page.get("dpi", 150), psm=psm)
            seconds[f"tess psm {psm}"] += time.perf_counter() - started
            trow = score(page, text, markup=False) | {"reader": f"tess psm {psm}"}
            by_reader[f"tess psm {psm}"].append(trow)
            written.append(trow | {"text": text})
        print(f"{page['name']:>18} " + " ".join(f"{r['reader']} {r['edits'] / max(r['chars'], 1):.4f}"
                                                for r in written), file=sys.stderr, flush=True)
        if out:
            for r in written:
                out.write(json.dumps(r) + "\n")
    no_osd = [f"tess psm {p}" for p in psms if p != "1"]
    if no_osd:
        by_reader["tess best psm"], chosen = best_per_kind(by_reader, no_osd)
    for name, rows in by_reader.items():
        took = f", {seconds[name] / max(len(rows), 1):.2f} s/page" if name in seconds else ""
        print(f"\n### {name} ({len(rows)} pages{took})\n")
        if name == "tess best psm":
            print("psm by kind: " + ", ".join(f"{k} {v.split()[-1]}" for k, v in chosen.items()) + "\n")
        print(table(rows))
    print("\n### order-sensitive CER by kind\n")
    print(cer_by_kind(by_reader))


if __name__ == "__main__":
    main()
