"""Tables on the CPU path against img2table with Tesseract, on a corpus of generated tables with exact cells.

The corpus (deterministic from a seed): ruled, partly ruled (rules across only) and borderless tables of 3-9 rows
and 3-5 columns; header cells spanning columns and rows, cells of two lines, numbers in en/de/fr notation, cells
in English, German, French and Chinese; some with a total below (an invoice), some degraded as a scan degrades
them (bench/cpu_corpus.py's blur, noise, JPEG, low contrast, uneven light); and tables split over a page break.

Scores, per kind: TEDS (tree-edit-distance similarity, PubTabNet's definition: APTED over the HTML trees, a cell
renamed at cost 1 when its spans differ, else the normalised edit distance of its text; header cells count as
cells), cell text CER (edits between the grids' texts, row by row / truth characters), seconds a page. Each
page is read by both, one process each, in one run. A table continued over a page break is scored on the
joined table (img2table does not join: its first page's table is scored).

    apt-get install tesseract-ocr tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-chi-sim
    python3 -m venv /tmp/tables-peer && /tmp/tables-peer/bin/pip install img2table==2.0.0   # own venv: it needs
        # opencv-contrib-python, which cannot sit beside ocrq's opencv-python
    .venv/bin/python bench/tables.py --out /tmp/tables [--tables 180] [--peer-python /tmp/tables-peer/bin/python]
    .venv/bin/python bench/tables.py --no-tables /tmp/corpus     # false tables on bench/cpu_corpus.py's pages
"""

from __future__ import annotations

import argparse
import html
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_corpus import degrade  # noqa: E402
from tests.support.pages import SERIF  # noqa: E402
from tests.support.table_pages import CJK, SANS, draw_table  # noqa: E402

LIBERATION = "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"
WORDS = {
    "en": (["Item", "Quantity", "Unit price", "Amount", "Date", "Note"],
           ["Oak beams", "Lime mortar", "Granite blocks", "Iron rings", "Copper nails", "Tar barrels", "Hemp rope",
            "Sail cloth", "Pine planks", "Lead sheet"]),
    "de": (["Artikel", "Menge", "Einzelpreis", "Betrag", "Datum", "Hinweis"],
           ["Eichenbalken", "Kalkmörtel", "Granitblöcke", "Eisenringe", "Kupfernägel", "Teerfässer", "Hanfseil",
            "Segeltuch", "Kiefernbretter", "Bleiblech"]),
    "fr": (["Article", "Quantité", "Prix unitaire", "Montant", "Date", "Remarque"],
           ["Poutres de chêne", "Mortier de chaux", "Blocs de granit", "Anneaux de fer", "Clous de cuivre",
            "Barils de goudron", "Corde de chanvre", "Toile à voile", "Planches de pin", "Feuille de plomb"]),
    "zh": (["项目", "数量", "单价", "金额", "日期", "备注"],
           ["橡木梁", "石灰砂浆", "花岗岩块", "铁环", "铜钉", "焦油桶", "麻绳", "帆布", "松木板", "铅板"]),
}
NOTES = {"en": ["cut to\nlength", "dry", "as agreed", "second\ndelivery"],
         "de": ["auf Maß\ngeschnitten", "trocken", "wie vereinbart", "zweite\nLieferung"],
         "fr": ["coupé à\nla mesure", "sec", "comme convenu", "seconde\nlivraison"],
         "zh": ["按尺寸\n切割", "干燥", "按约定", "第二批"]}
GROUP = {"en": "Price", "de": "Preis", "fr": "Prix", "zh": "价格"}
TESS_LANG = {"en": "eng", "de": "deu", "fr": "fra", "zh": "chi_sim"}


def _money(value: float, lang: str) -> str:
    text = f"{value:,.2f}"
    if lang == "de":
        return text.replace(",", "_").replace(".", ",").replace("_", ".")
    if lang == "fr":
        return text.replace(",", " ").replace(".", ",")
    return text


def _date(rng: random.Random, lang: str) -> str:
    d, m = rng.randint(1, 28), rng.randint(1, 12)
    return {"de": f"{d:02d}.{m:02d}.2026", "fr": f"{d:02d}/{m:02d}/2026"}.get(lang, f"2026-{m:02d}-{d:02d}")


def make_table(n: int, rng: random.Random) -> dict:
    """One table's spec and cells."""
    kind = ("ruled", "partly ruled", "borderless")[n % 3]
    lang = ("en", "de", "fr", "zh")[(n // 3) % 4]
    heads, items = WORDS[lang]
    columns = rng.randint(3, 5)
    rows_n = rng.randint(3, 9)
    multi = rng.random() < 0.3
    spans = rng.random() < 0.3 and columns >= 4
    fields = {3: ["item", "qty", "amount"], 4: ["item", "qty", "price", "amount"],
              5: ["item", "qty", "price", "amount", "date"]}[columns]
    if multi:
        fields[-1 if columns == 5 else 1] = "note"
    names = dict(zip(["item", "qty", "price", "amount", "date", "note"], heads, strict=True))
    rows: list[list] = []
    if spans and "price" in fields and "amount" in fields:  # a group header over the price and amount columns
        at = fields.index("price")
        rows.append([(names[f], 2, 1) for f in fields[:at]] + [(GROUP[lang], 1, 2), None]
                    + [(names[f], 2, 1) for f in fields[at + 2:]])
        rows.append([None] * at + [names["price"], names["amount"]] + [None] * (len(fields) - at - 2))
    else:
        spans = False
        rows.append([names[f] for f in fields])
    total = 0.0
    for _ in range(rows_n):
        qty, price = rng.randint(1, 400), rng.randint(50, 500000) / 100
        total += qty * price
        values = {"item": rng.choice(items), "qty": str(qty), "price": _money(price, lang),
                  "amount": _money(qty * price, lang), "date": _date(rng, lang), "note": rng.choice(NOTES[lang])}
        rows.append([values[f] for f in fields])
    font = CJK if lang == "zh" else rng.choice([SERIF, SANS, LIBERATION])
    degraded = sorted(rng.sample(["blur", "noise", "jpeg", "contrast", "light"], rng.randint(1, 2))
                      ) if rng.random() < 0.25 else []
    below = f"{'Total' if lang != 'zh' else '合计'}: {_money(total, lang)}" if rng.random() < 0.4 else None
    split = rng.random() < 0.12 and rows_n >= 6 and not spans
    return {"name": f"t{n:03d}-{lang}", "kind": kind, "lang": lang, "rows": rows, "font": font,
            "size": rng.randint(20, 28), "degraded": degraded, "below": below, "split": split, "spans": spans,
            "multi": multi}


def render(spec: dict, rng: random.Random) -> tuple[list[Image.Image], dict]:
    """The table's page (two when it is split over a page break) and its truth."""
    rules = {"ruled": "all", "partly ruled": "across", "borderless": "none"}[spec["kind"]]
    args = {"rules": rules, "font": spec["font"], "size": spec["size"]}
    rows = spec["rows"]
    if spec["split"]:
        cut = len(rows) // 2 + 1
        first, truth = draw_table(rows[:cut], page=(1240, 1000), at=(80, 1000 - 60 - 60 * cut), **args)
        second, _ = draw_table(rows[cut:], header=False, title=None, page=(1240, 1000), at=(80, 80),
                               widths=truth.widths, below=spec["below"], **args)
        _, whole = draw_table(rows, page=(1240, 3000), widths=truth.widths, **args)
        pages = [first, second]
        truth = whole
    else:
        page, truth = draw_table(rows, page=(1240, 1200), below=spec["below"], **args)
        pages = [page]
    if spec["degraded"]:
        pages = [degrade(p, spec["degraded"], rng, None) for p in pages]
    return pages, {"rows": truth.rows, "columns": truth.columns,
                   "cells": [list(c) for c in truth.cells]}


def generate(out: Path, *, seed: int, tables: int) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for n in range(tables):
        rng = random.Random(f"{seed}:{n}")
        spec = make_table(n, rng)
        pages, truth = render(spec, rng)
        spec["pages"] = []
        for i, page in enumerate(pages):
            name = f"{spec['name']}-{i + 1}.png"
            page.save(out / name)
            spec["pages"].append(name)
        spec["truth"] = truth
        index.append(spec)
    (out / "index.json").write_text(json.dumps({"seed": seed, "tables": index}, ensure_ascii=False, indent=1))
    return index


# --- scoring --------------------------------------------------------------------------------------------


def html_of(rows: int, columns: int, cells: list) -> str:
    """A table as HTML (td only), from (row, col, row_span, col_span, text) cells."""
    by_row: dict[int, list] = {}
    for r, c, rs, cs, text in sorted(cells, key=lambda x: (x[0], x[1])):
        by_row.setdefault(r, []).append((rs, cs, text))
    body = []
    for r in range(rows):
        tds = "".join(f"<td{f' rowspan={rs}' if rs > 1 else ''}{f' colspan={cs}' if cs > 1 else ''}>"
                      f"{html.escape(text)}</td>" for rs, cs, text in by_row.get(r, []))
        body.append(f"<tr>{tds}</tr>")
    return f"<table>{''.join(body)}</table>"


class _Node:
    def __init__(self, tag: str, colspan: int = 1, rowspan: int = 1, content: str = "") -> None:
        self.tag, self.colspan, self.rowspan, self.content, self.children = tag, colspan, rowspan, content, []


def _tree(rows: int, cells: list) -> _Node:
    root = _Node("table")
    by_row: dict[int, list] = {}
    for r, c, rs, cs, text in sorted(cells, key=lambda x: (x[0], x[1])):
        by_row.setdefault(r, []).append(_Node("td", cs, rs, " ".join(str(text).split())))
    for r in range(rows):
        tr = _Node("tr")
        tr.children = by_row.get(r, [])
        root.children.append(tr)
    return root


def teds(truth: dict, pred: dict | None) -> float:
    """Tree-edit-distance similarity of two tables (structure and cell text), 0-1."""
    from apted import APTED, Config
    from rapidfuzz.distance import Levenshtein

    class _Config(Config):
        def rename(self, a, b):
            if a.tag != b.tag or a.colspan != b.colspan or a.rowspan != b.rowspan:
                return 1.0
            if a.tag == "td":
                return Levenshtein.normalized_distance(a.content, b.content) if (a.content or b.content) else 0.0
            return 0.0

        def children(self, node):
            return node.children

    def count(node) -> int:
        return 1 + sum(count(c) for c in node.children)

    t = _tree(truth["rows"], truth["cells"])
    p = _tree(pred["rows"], pred["cells"]) if pred else _Node("table")
    distance = APTED(t, p, _Config()).compute_edit_distance()
    return max(0.0, 1.0 - distance / max(count(t), count(p)))


def _grid_text(table: dict | None) -> str:
    if not table:
        return ""
    grid = [["" for _ in range(table["columns"])] for _ in range(table["rows"])]
    for r, c, _, _, text in table["cells"]:
        if r < table["rows"] and c < table["columns"]:
            grid[r][c] = " ".join(str(text).split())
    return "\n".join("\t".join(row) for row in grid)


def cell_cer(truth: dict, pred: dict | None) -> float:
    from rapidfuzz.distance import Levenshtein

    a, b = _grid_text(truth), _grid_text(pred)
    return Levenshtein.distance(a, b) / max(len(a), 1)


# --- readers --------------------------------------------------------------------------------------------


def ocrq_tables(engine, images: list[Image.Image]) -> dict | None:
    """The CPU engine's table (the one with most cells; a table over the page break joined)."""
    from common.formats.tables import document_tables

    class _Page:
        def __init__(self, index, read, image):
            self.index, self.status, self.blocks, self.width = index, "succeeded", read.blocks, image.width

    pages = [_Page(i, read, image) for i, (read, image) in enumerate(zip(engine.read(images), images, strict=True))]
    found = document_tables(pages)
    if not found:
        return None
    best = max(found, key=lambda t: len(t.cells))
    return {"rows": best.rows, "columns": best.columns, "pages": best.pages,
            "cells": [[c.row, c.col, c.row_span, c.col_span, c.text] for c in best.cells]}


PEER = r'''
import json, sys, time
from img2table.document import Image as Doc
from img2table.ocr import TesseractOCR
jobs = json.loads(sys.stdin.read())
ocrs = {}
for job in jobs:
    lang = job["lang"]
    ocr = ocrs.setdefault(lang, TesseractOCR(n_threads=1, lang=lang))
    started = time.perf_counter()
    tables = Doc(job["path"]).extract_tables(ocr=ocr, implicit_rows=True, implicit_columns=True,
                                             borderless_tables=True, min_confidence=50)
    seconds = time.perf_counter() - started
    best = None
    for table in tables:
        cells, seen = [], {}
        for r, row in table.content.items():
            for c, cell in enumerate(row):
                key = (cell.bbox.x1, cell.bbox.y1, cell.bbox.x2, cell.bbox.y2)
                if key in seen:
                    first = seen[key]
                    first[2] = max(first[2], r - first[0] + 1)
                    first[3] = max(first[3], c - first[1] + 1)
                    continue
                seen[key] = [r, c, 1, 1, cell.value or ""]
                cells.append(seen[key])
        found = {"rows": len(table.content), "columns": max((len(r) for r in table.content.values()), default=0),
                 "cells": cells}
        if best is None or len(cells) > len(best["cells"]):
            best = found
    print(json.dumps({"name": job["name"], "table": best, "seconds": seconds}), flush=True)
'''


def peer_tables(python: str, jobs: list[dict]) -> dict[str, dict]:
    """img2table with Tesseract (one thread) on each table's first page, in its own interpreter."""
    done = subprocess.run([python, "-c", PEER], input=json.dumps(jobs), capture_output=True, text=True,
                          env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin:/bin"}, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the peer failed: {done.stderr[-2000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"name"')]  # not its chatter
    return {row["name"]: row for row in rows}


def run(out: Path, *, seed: int, tables: int, peer_python: str | None) -> dict:
    from worker.engines.cpu import CpuEngine

    index = generate(out, seed=seed, tables=tables)
    engine = CpuEngine()
    engine.read([Image.open(out / index[0]["pages"][0]).convert("RGB")])  # warm
    rows = []
    for spec in index:
        images = [Image.open(out / p).convert("RGB") for p in spec["pages"]]
        started = time.perf_counter()
        found = ocrq_tables(engine, images)
        seconds = (time.perf_counter() - started) / len(images)
        rows.append({"name": spec["name"], "kind": spec["kind"], "lang": spec["lang"], "degraded": bool(spec["degraded"]),
                     "split": spec["split"], "spans": spec["spans"], "multi": spec["multi"], "reader": "ocrq",
                     "teds": teds(spec["truth"], found), "cer": cell_cer(spec["truth"], found), "seconds": seconds,
                     "joined": bool(found) and len(found.get("pages", [])) == len(images)})
    if peer_python:
        jobs = [{"name": s["name"], "lang": TESS_LANG[s["lang"]], "path": str(out / s["pages"][0])} for s in index]
        peer = peer_tables(peer_python, jobs)
        for spec in index:
            got = peer[spec["name"]]
            rows.append({"name": spec["name"], "kind": spec["kind"], "lang": spec["lang"],
                         "degraded": bool(spec["degraded"]), "split": spec["split"], "spans": spec["spans"],
                         "multi": spec["multi"], "reader": "img2table+tesseract",
                         "teds": teds(spec["truth"], got["table"]), "cer": cell_cer(spec["truth"], got["table"]),
                         "seconds": got["seconds"], "joined": False})
    (out / "scores.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return summarise(rows)


def summarise(rows: list[dict]) -> dict:
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        for group in (row["kind"], f"{row['kind']}, clean" if not row["degraded"] else f"{row['kind']}, degraded",
                      f"lang {row['lang']}", "spanning header" if row["spans"] else None,
                      "two-line cells" if row["multi"] else None, "over a page break" if row["split"] else None,
                      "all"):
            if group:
                groups.setdefault((group, row["reader"]), []).append(row)
    out = {}
    for (group, reader), members in groups.items():
        out.setdefault(group, {})[reader] = {
            "tables": len(members), "teds": round(statistics.fmean(m["teds"] for m in members), 4),
            "cer": round(statistics.fmean(m["cer"] for m in members), 4),
            "s_page": round(statistics.fmean(m["seconds"] for m in members), 3),
            "joined": sum(m["joined"] for m in members) if group == "over a page break" else None}
    return out


def no_tables(corpus: Path) -> dict:
    """Tables the CPU engine finds on bench/cpu_corpus.py's pages, by the page's layout."""
    from common.formats.tables import from_block
    from worker.engines.cpu import CpuEngine

    engine = CpuEngine()
    index = json.loads((corpus / "index.json").read_text())["pages"]
    found: dict[str, list[int]] = {}
    for page in index:
        [read] = engine.read([Image.open(corpus / f"{page['name']}.png").convert("RGB")])
        tables = sum(from_block(b) is not None for b in read.blocks or [])
        found.setdefault(page["layout"], []).append(tables)
    return {layout: {"pages": len(v), "pages_with_a_table": sum(1 for t in v if t), "tables": sum(v)}
            for layout, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--tables", type=int, default=180)
    parser.add_argument("--peer-python", default=None)
    parser.add_argument("--no-tables", type=Path, default=None, help="a bench/cpu_corpus.py corpus")
    args = parser.parse_args()
    if args.no_tables:
        print(json.dumps(no_tables(args.no_tables), indent=1))
        return
    summary = run(args.out, seed=args.seed, tables=args.tables, peer_python=args.peer_python)
    print(json.dumps(summary, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
