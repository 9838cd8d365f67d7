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

Extra kinds (--extra N, after the 180): tables on pages tilted 1-4 degrees, and on photographed-looking pages
(perspective, a desk around the page, light falling off, blur, noise, JPEG); --real: Debian's and Ubuntu's
release lists (real CSV files) laid out by LibreOffice. Peers: img2table with Tesseract at each kind's best
settings (--sweep N tries settings_grid on N tables a kind and writes peer-settings.json; the committed
bench/tables_peer_settings.json is one such sweep), and Tesseract's own TSV grid (--tesseract). The run also
scores the GPU path's parser: each truth written as LightOnOCR's markup, parsed back (not the model's accuracy).

    apt-get install tesseract-ocr tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-chi-sim
    python3 -m venv /tmp/tables-peer && /tmp/tables-peer/bin/pip install img2table==2.0.0   # own venv: it needs
        # opencv-contrib-python, which cannot sit beside ocrq's opencv-python
    .venv/bin/python bench/tables.py --out /tmp/tables --extra 24 --sweep 2 --peer-python /tmp/tables-peer/bin/python
    .venv/bin/python bench/tables.py --out /tmp/tables [--tables 180] [--extra 24] [--real] [--tesseract] \
        [--peer-python /tmp/tables-peer/bin/python --peer-settings bench/tables_peer_settings.json]
    .venv/bin/python bench/tables.py --no-tables /tmp/corpus     # false tables on bench/cpu_corpus.py's pages
"""

from __future__ import annotations

import argparse
import html
import io
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


EXTRA_KINDS = ("tilted", "photographed")


def make_table(n: int, rng: random.Random, *, kind: str | None = None) -> dict:
    """One table's spec and cells; `kind` tilted or photographed: a table of any rules on such a page."""
    rules = ("ruled", "partly ruled", "borderless")[n % 3]
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
    return {"name": f"t{n:03d}-{lang}", "kind": kind or rules, "table_rules": rules, "lang": lang, "rows": rows,
            "font": font, "tilt": round(rng.choice([-1, 1]) * rng.uniform(1.0, 4.0), 2) if kind == "tilted" else 0.0,
            "size": rng.randint(20, 28), "degraded": [] if kind else degraded, "below": below,
            "split": split and not kind, "spans": spans,
            "multi": multi}


def render(spec: dict, rng: random.Random) -> tuple[list[Image.Image], dict]:
    """The table's page (two when it is split over a page break) and its truth."""
    rules = {"ruled": "all", "partly ruled": "across", "borderless": "none"}[spec.get("table_rules", spec["kind"])]
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
    if spec.get("tilt"):
        pages = [p.rotate(spec["tilt"], resample=Image.BICUBIC, expand=True, fillcolor="white") for p in pages]
    if spec["kind"] == "photographed":
        pages = [photographed(p, rng) for p in pages]
    return pages, {"rows": truth.rows, "columns": truth.columns,
                   "cells": [list(c) for c in truth.cells]}


def photographed(page: Image.Image, rng: random.Random) -> Image.Image:
    """The page as a phone sees it on a desk: in perspective (a corner nearer), a grey desk around it, light
    falling off to one side, a little blur and sensor noise, saved as a JPEG."""
    import cv2
    import numpy as np

    w, h = page.size
    margin = int(0.06 * max(w, h))
    src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    jitter = [(rng.uniform(0, 0.06) * w, rng.uniform(0, 0.05) * h) for _ in range(4)]
    dst = np.float32([[margin + jitter[0][0], margin + jitter[0][1]],
                      [w + margin - jitter[1][0], margin + jitter[1][1]],
                      [w + margin - jitter[2][0], h + margin - jitter[2][1]],
                      [margin + jitter[3][0], h + margin - jitter[3][1]]])
    matrix = cv2.getPerspectiveTransform(src, dst)
    gray = np.asarray(page.convert("L"), dtype=np.uint8)
    array = cv2.warpPerspective(gray, matrix, (w + 2 * margin, h + 2 * margin), flags=cv2.INTER_CUBIC,
                                borderValue=int(rng.uniform(90, 140))).astype(np.float32)
    ys, xs = np.mgrid[0:array.shape[0], 0:array.shape[1]]
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (xs * np.cos(angle) + ys * np.sin(angle)) / np.hypot(*array.shape)
    array = array * (1 - rng.uniform(0.3, 0.5) * (ramp - ramp.min()) / (np.ptp(ramp) or 1))
    array = cv2.GaussianBlur(array, (0, 0), rng.uniform(0.5, 0.9))
    array = array + np.random.default_rng(rng.randint(0, 2**31)).normal(0, 5, array.shape)
    out = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8)).convert("RGB")
    buffer = io.BytesIO()
    out.save(buffer, "JPEG", quality=rng.randint(60, 85))
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def generate(out: Path, *, seed: int, tables: int, extra: int = 0) -> list[dict]:
    """`tables` tables of the three rules, then `extra` on tilted and photographed pages (half each)."""
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for n in range(tables + extra):
        rng = random.Random(f"{seed}:{n}")
        spec = make_table(n, rng, kind=EXTRA_KINDS[n % 2] if n >= tables else None)
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


REAL_CSV = ("/usr/share/distro-info/debian.csv", "/usr/share/distro-info/ubuntu.csv")


def real_tables(out: Path) -> list[dict]:
    """Tables others wrote: Debian's and Ubuntu's release lists (distro-info-data's CSV files), laid out and
    printed to PDF by LibreOffice Calc (every column read as text, so its dates stay as written), rendered at
    150 dpi; the truth is the CSV's cells. Ubuntu's runs over two pages, its header on the first only."""
    import csv as csv_module

    out.mkdir(parents=True, exist_ok=True)
    index = []
    for source in REAL_CSV:
        name = Path(source).stem
        rows = list(csv_module.reader(open(source, encoding="utf-8")))
        width = max(len(r) for r in rows)
        types = "/".join(f"{c + 1}/2" for c in range(width))
        subprocess.run(["soffice", "--headless", f"-env:UserInstallation=file://{out}/profile",
                        f"--infilter=CSV:44,34,76,1,{types}", "--convert-to", "pdf", "--outdir", str(out), source],
                       capture_output=True, timeout=300, check=True)
        for old in out.glob(f"real-{name}-*.png"):
            old.unlink()
        subprocess.run(["pdftoppm", "-r", "150", "-png", str(out / f"{name}.pdf"), str(out / f"real-{name}")],
                       check=True, timeout=300)
        pages = sorted(p.name for p in out.glob(f"real-{name}-*.png"))
        cells = [[r, c, 1, 1, row[c] if c < len(row) else ""] for r, row in enumerate(rows) for c in range(width)]
        index.append({"name": f"real-{name}", "kind": "LibreOffice, real data", "lang": "en", "rows": rows,
                      "degraded": [], "split": len(pages) > 1, "spans": False, "multi": False, "pages": pages,
                      "truth": {"rows": len(rows), "columns": width, "cells": cells}})
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


PEER = r"""
import json, sys, time
from img2table.document import Image as Doc
from img2table.document._types import MockDocument
from img2table.ocr import TesseractOCR
jobs = json.loads(sys.stdin.read())
ocrs = {}
for job in jobs:
    # One OCR of the page for each (psm, rotation), shared by the structure settings tried on it.
    by_ocr = {}
    for setting in job["settings"]:
        by_ocr.setdefault((setting["psm"], setting["detect_rotation"]), []).append(setting)
    for (psm, rotation), settings in by_ocr.items():
        ocr = ocrs.setdefault((job["lang"], psm), TesseractOCR(n_threads=1, lang=job["lang"], psm=psm))
        started = time.perf_counter()
        doc = Doc(job["path"], detect_rotation=rotation)
        data = ocr.of(document=MockDocument(images=doc.images))
        ocr_seconds = time.perf_counter() - started
        for setting in settings:
            started = time.perf_counter()
            doc.ocr_data = data
            try:
                tables = doc.extract_tables(ocr=ocr, implicit_rows=setting["implicit_rows"],
                                            implicit_columns=setting["implicit_columns"],
                                            borderless_tables=setting["borderless_tables"],
                                            min_confidence=setting["min_confidence"])
                error = None
            except Exception as exc:  # img2table 2.0.0 fails on some pages (a word of None in a title): no table
                tables, error = [], repr(exc)
            seconds = ocr_seconds + time.perf_counter() - started
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
                found = {"rows": len(table.content),
                         "columns": max((len(r) for r in table.content.values()), default=0), "cells": cells}
                if best is None or len(cells) > len(best["cells"]):
                    best = found
            print(json.dumps({"name": job["name"], "setting": setting, "table": best, "seconds": seconds,
                              "error": error}), flush=True)
"""
DEFAULT_SETTING = {"implicit_rows": True, "implicit_columns": True, "borderless_tables": True, "min_confidence": 50,
                   "psm": 11, "detect_rotation": False}


def settings_grid(kind: str) -> list[dict]:
    """img2table's options worth trying on a kind: its structure switches, confidence floors, Tesseract's psm
    (11 its default, 6 one block, 3 automatic), and its own deskew where the page is not level."""
    rotations = (False, True) if kind in EXTRA_KINDS else (False,)
    return [{"implicit_rows": ir, "implicit_columns": ic, "borderless_tables": bt, "min_confidence": mc,
             "psm": psm, "detect_rotation": rot}
            for ir in (False, True) for ic in (False, True) for bt in (False, True) for mc in (1, 50, 80)
            for psm in (11, 6, 3) for rot in rotations]


def setting_name(setting: dict) -> str:
    return (f"rows {'I' if setting['implicit_rows'] else '-'} cols {'I' if setting['implicit_columns'] else '-'}"
            f" borderless {'y' if setting['borderless_tables'] else 'n'} conf {setting['min_confidence']}"
            f" psm {setting['psm']}{' deskew' if setting['detect_rotation'] else ''}")


def peer_tables(python: str, jobs: list[dict]) -> list[dict]:
    """img2table with Tesseract (one thread) on each job's page, with each of its settings, in its own
    interpreter: one row a (page, setting)."""
    done = subprocess.run([python, "-c", PEER], input=json.dumps(jobs), capture_output=True, text=True,
                          env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin:/bin"}, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the peer failed: {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"name"')]  # not its chatter


def tesseract_grid(path: Path, lang: str) -> tuple[dict | None, float]:
    """Tesseract's own TSV (psm 6, one thread) made into a grid: its lines are the rows; a line's words part
    into phrases at gaps wider than the words' height; the columns are the x-ranges no phrase crosses in the
    lines with the most phrases. The table is the lines from the first to the last of two phrases or more."""
    import csv as csv_module

    started = time.perf_counter()
    done = subprocess.run(["tesseract", str(path), "-", "--psm", "6", "-l", lang, "tsv"], capture_output=True,
                          text=True, env={"OMP_THREAD_LIMIT": "1", "PATH": "/usr/bin:/bin"}, timeout=300)
    seconds = time.perf_counter() - started
    lines: dict[tuple, list] = {}
    for row in csv_module.DictReader(done.stdout.splitlines(), delimiter="\t", quoting=csv_module.QUOTE_NONE):
        if row["level"] == "5" and row["text"].strip():
            x, w, h = int(row["left"]), int(row["width"]), int(row["height"])
            lines.setdefault((row["block_num"], row["par_num"], row["line_num"]), []).append((x, x + w, h, row["text"]))
    phrased = []
    for words in lines.values():
        words.sort()
        height = statistics.median(w[2] for w in words)
        phrases = [[words[0]]]
        for word in words[1:]:
            if word[0] - phrases[-1][-1][1] > height:
                phrases.append([word])
            else:
                phrases[-1].append(word)
        phrased.append([(p[0][0], p[-1][1], " ".join(w[3] for w in p)) for p in phrases])
    wide = [i for i, p in enumerate(phrased) if len(p) >= 2]
    if not wide:
        return None, seconds
    body = phrased[wide[0]:wide[-1] + 1]
    most = max(len(p) for p in body)
    spans = sorted((a, b) for p in body if len(p) == most for a, b, _ in p)
    columns: list[list[int]] = []
    for a, b in spans:
        if columns and a <= columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], b)
        else:
            columns.append([a, b])
    cells = []
    for r, phrases in enumerate(body):
        texts: dict[int, list[str]] = {}
        for a, b, text in phrases:
            centre = (a + b) / 2
            col = min(range(len(columns)), key=lambda c: 0 if columns[c][0] <= centre <= columns[c][1]
                      else min(abs(centre - columns[c][0]), abs(centre - columns[c][1])))
            texts.setdefault(col, []).append(text)
        cells += [[r, c, 1, 1, " ".join(t)] for c, t in sorted(texts.items())]
    return {"rows": len(body), "columns": len(columns), "cells": cells}, seconds


def gpu_markup(truth: dict, rng: random.Random) -> tuple[str, str]:
    """The truth as LightOnOCR writes a table: HTML (thead/th for the header rows, rowspan/colspan, <br> between
    a cell's lines; now and then <b> or <p> around a cell, &nbsp; for a space, a style, a newline between tags,
    a cell or a row or the table left unclosed) and a markdown
    pipe table of the same grid (no spans: a spanned cell's text in its first slot, the others empty)."""
    cells = sorted(truth["cells"], key=lambda c: (c[0], c[1]))
    header_rows = max((r + rs for r, c, rs, cs, _ in cells if r == 0), default=1)
    rows: dict[int, list] = {}
    for cell in cells:
        rows.setdefault(cell[0], []).append(cell)
    out = ["<table>"]
    for r in range(truth["rows"]):
        if r == 0:
            out.append("<thead>")
        if r == header_rows:
            out.append("</thead><tbody>")
        out.append("<tr>")
        for _, _, rs, cs, text in rows.get(r, []):
            tag = "th" if r < header_rows else "td"
            body = rng.choice(["<br>", "<br/>", "<br />"]).join(html.escape(line).replace(" ", rng.choice(
                [" ", " ", "&nbsp;"])) for line in text.split("\n"))
            if tag == "th" and rng.random() < 0.3:
                body = f"<b>{body}</b>"
            elif rng.random() < 0.05:
                body = f"<p>{body}</p>"
            attrs = (f' rowspan="{rs}"' if rs > 1 else "") + (f' colspan="{cs}"' if cs > 1 else "")
            if text[:1].isdigit() and rng.random() < 0.3:
                attrs += ' style="text-align: right"'
            if rng.random() < 0.1:
                out.append("\n  ")
            close = "" if rng.random() < 0.1 else f"</{tag}>"
            out.append(f"<{tag}{attrs}>{body}{close}")
        out.append("" if rng.random() < 0.1 else "</tr>")
    out.append("</tbody></table>" if rng.random() < 0.9 else "</tbody>")  # now and then never closed
    grid = [["" for _ in range(truth["columns"])] for _ in range(truth["rows"])]
    for r, c, _, _, text in cells:
        grid[r][c] = "<br>".join(text.split("\n")).replace("|", "\\|")
    pipes = [f"| {' | '.join(grid[0])} |", f"|{'---|' * truth['columns']}"] + [f"| {' | '.join(row)} |"
                                                                              for row in grid[1:]]
    return "".join(out), "\n".join(pipes)


def gpu_parser_scores(index: list[dict], seed: int) -> dict:
    """The GPU path after the model: each truth written as LightOnOCR's markup on a page of markdown (a heading
    above, a line below) through gpu_blocks.build_blocks and common.formats.tables, against the truth."""
    from common.formats.tables import from_block
    from worker.engines.gpu_blocks import build_blocks

    out: dict[str, list[dict]] = {}
    for spec in index:
        truth = spec["truth"]
        rng = random.Random(f"{seed}:gpu:{spec['name']}")
        for form, markup in zip(("html", "pipes"), gpu_markup(_lines_kept(spec), rng), strict=True):
            page = f"# {spec['name']}\n\n{markup}\n\nThe end of the page."
            blocks, _ = build_blocks(page, [], [], size=(1240, 1200))
            tables = [t for t in (from_block(b) for b in blocks) if t is not None]
            got = max(tables, key=lambda t: len(t.cells), default=None)
            pred = got and {"rows": got.rows, "columns": got.columns,
                            "cells": [[c.row, c.col, c.row_span, c.col_span, c.text] for c in got.cells]}
            target = truth if form == "html" else _unspanned(truth)
            out.setdefault(form, []).append({"kind": spec["kind"], "teds": teds(target, pred),
                                             "cer": cell_cer(target, pred), "parsed": pred is not None})
    return {form: {"tables": len(rows), "parsed": sum(r["parsed"] for r in rows),
                   "teds": round(statistics.fmean(r["teds"] for r in rows), 4),
                   "teds_min": round(min(r["teds"] for r in rows), 4),
                   "cer": round(statistics.fmean(r["cer"] for r in rows), 4)} for form, rows in out.items()}


def _lines_kept(spec: dict) -> dict:
    """The truth with each cell's lines apart (the truth joins them by a space), from the spec's rows."""
    texts = {}
    r = 0
    for row in spec["rows"]:
        c = 0
        for value in row:
            if value is not None:
                texts[(r, c)] = value[0] if isinstance(value, (tuple, list)) else value
            c += 1
        r += 1
    truth = spec["truth"]
    return {"rows": truth["rows"], "columns": truth["columns"],
            "cells": [[r, c, rs, cs, texts.get((r, c), text)] for r, c, rs, cs, text in truth["cells"]]}


def _unspanned(truth: dict) -> dict:
    """A pipe table's truth: the same grid with every span 1 and the spanned-over slots empty cells."""
    cells = {(r, c): text for r, c, _, _, text in truth["cells"]}
    return {"rows": truth["rows"], "columns": truth["columns"],
            "cells": [[r, c, 1, 1, cells.get((r, c), "")]
                      for r in range(truth["rows"]) for c in range(truth["columns"])]}


def _row(spec: dict, reader: str, found: dict | None, seconds: float, joined: bool = False) -> dict:
    return {"name": spec["name"], "kind": spec["kind"], "lang": spec["lang"], "degraded": bool(spec["degraded"]),
            "split": spec["split"], "spans": spec["spans"], "multi": spec["multi"], "reader": reader,
            "teds": teds(spec["truth"], found), "cer": cell_cer(spec["truth"], found), "seconds": seconds,
            "joined": joined}


def sweep(out: Path, *, seed: int, tables: int, extra: int, peer_python: str, per_kind: int) -> dict:
    """img2table's settings (settings_grid) on the first `per_kind` tables of each kind: each setting's TEDS,
    cell CER and seconds a page by kind, and the best setting of each kind (mean TEDS, then CER)."""
    index = generate(out, seed=seed, tables=tables, extra=extra)
    chosen: dict[str, list[dict]] = {}
    for spec in index:
        if len(chosen.setdefault(spec["kind"], [])) < per_kind:
            chosen[spec["kind"]].append(spec)
    jobs = [{"name": s["name"], "lang": TESS_LANG[s["lang"]], "path": str(out / s["pages"][0]),
             "settings": settings_grid(kind)} for kind, specs in chosen.items() for s in specs]
    by_name = {s["name"]: s for specs in chosen.values() for s in specs}
    scores: dict[str, dict[str, list]] = {}
    for got in peer_tables(peer_python, jobs):
        spec = by_name[got["name"]]
        scores.setdefault(spec["kind"], {}).setdefault(json.dumps(got["setting"], sort_keys=True), []).append(
            (teds(spec["truth"], got["table"]), cell_cer(spec["truth"], got["table"]), got["seconds"]))
    result = {}
    for kind, by_setting in scores.items():
        ranked = sorted(((statistics.fmean(t for t, _, _ in v), statistics.fmean(c for _, c, _ in v),
                          statistics.median(x for _, _, x in v), k) for k, v in by_setting.items()),
                        key=lambda x: (-x[0], x[1]))
        result[kind] = {"tables": len(chosen[kind]), "best": json.loads(ranked[0][3]),
                        "default": next({"teds": round(t, 4), "cer": round(c, 4), "s_page": round(x, 2)}
                                        for t, c, x, k in ranked if json.loads(k) == DEFAULT_SETTING),
                        "settings": [{"setting": setting_name(json.loads(k)), "teds": round(t, 4),
                                      "cer": round(c, 4), "s_page": round(x, 2)} for t, c, x, k in ranked]}
    (out / "peer-settings.json").write_text(json.dumps(result, indent=1))
    return result


def _sweep_kind(kind: str) -> str:
    return "borderless" if kind == "LibreOffice, real data" else kind  # its cells have no rules


def run(out: Path, *, seed: int, tables: int, extra: int, peer_python: str | None, peer_settings: Path | None,
        tesseract: bool, real: bool) -> dict:
    from worker.engines.cpu import CpuEngine

    index = generate(out, seed=seed, tables=tables, extra=extra) + (real_tables(out) if real else [])
    engine = CpuEngine()
    engine.read([Image.open(out / index[0]["pages"][0]).convert("RGB")])  # warm
    rows = []
    for spec in index:
        images = [Image.open(out / p).convert("RGB") for p in spec["pages"]]
        started = time.perf_counter()
        found = ocrq_tables(engine, images)
        seconds = (time.perf_counter() - started) / len(images)
        rows.append(_row(spec, "ocrq", found, seconds, bool(found) and len(found.get("pages", [])) == len(images)))
    if peer_python:
        best = json.loads(peer_settings.read_text()) if peer_settings else {}
        jobs = [{"name": s["name"], "lang": TESS_LANG[s["lang"]], "path": str(out / s["pages"][0]),
                 "settings": [best[_sweep_kind(s["kind"])]["best"] if _sweep_kind(s["kind"]) in best
                              else DEFAULT_SETTING]} for s in index]
        peer = {got["name"]: got for got in peer_tables(peer_python, jobs)}
        for spec in index:
            got = peer[spec["name"]]
            rows.append(_row(spec, "img2table+tesseract", got["table"], got["seconds"]) | {"error": got["error"]})
    if tesseract:
        for spec in index:
            found, seconds = tesseract_grid(out / spec["pages"][0], TESS_LANG[spec["lang"]])
            rows.append(_row(spec, "tesseract tsv", found, seconds))
    (out / "scores.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return {"cpu": summarise(rows), "gpu parser (truth as markup, not the model)": gpu_parser_scores(index, seed)}


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
    found: dict[str, list[tuple[str, int]]] = {}
    for page in index:
        [read] = engine.read([Image.open(corpus / f"{page['name']}.png").convert("RGB")])
        tables = sum(from_block(b) is not None for b in read.blocks or [])
        found.setdefault(page["layout"], []).append((page["name"], tables))
    # Pages of the table layout should hold one; on the others every table is a false one, named to look at.
    return {layout: {"pages": len(v), "pages_with_a_table": sum(1 for _, t in v if t), "tables": sum(t for _, t in v)}
            | ({"pages_without": [n for n, t in v if not t]} if layout == "table" else
               {"pages_with": [n for n, t in v if t]})
            for layout, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--tables", type=int, default=180)
    parser.add_argument("--extra", type=int, default=0, help="tables on tilted and photographed pages, after")
    parser.add_argument("--peer-python", default=None)
    parser.add_argument("--peer-settings", type=Path, default=None,
                        help="a --sweep's peer-settings.json: each kind's best img2table settings")
    parser.add_argument("--sweep", type=int, default=0, help="try img2table's settings on this many tables a kind")
    parser.add_argument("--tesseract", action="store_true", help="Tesseract's own TSV grid (psm 6) as a peer")
    parser.add_argument("--real", action="store_true", help="and REAL_CSV's tables, laid out by LibreOffice")
    parser.add_argument("--no-tables", type=Path, default=None, help="a bench/cpu_corpus.py corpus")
    args = parser.parse_args()
    if args.no_tables:
        print(json.dumps(no_tables(args.no_tables), indent=1))
        return
    if args.sweep:
        print(json.dumps(sweep(args.out, seed=args.seed, tables=args.tables, extra=args.extra,
                               peer_python=args.peer_python, per_kind=args.sweep), indent=1))
        return
    summary = run(args.out, seed=args.seed, tables=args.tables, extra=args.extra, peer_python=args.peer_python,
                  peer_settings=args.peer_settings, tesseract=args.tesseract, real=args.real)
    print(json.dumps(summary, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
