"""The CPU engine on bench/layout_corpus.py's pages, scored fairly (issue 56): beside the order-sensitive CER, an
order-free CER (words sorted), a word error rate with spaces kept, a reading-order score (Kendall's tau over the
truth's parts found in the reading) and F1 for headings and list items (markdown kinds against the generator's).

    .venv/bin/python bench/layout_corpus.py --out /tmp/layouts
    .venv/bin/python bench/layout_scores.py --corpus /tmp/layouts [--jsonl pages.jsonl]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rapidfuzz import fuzz  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from common.formats.plain import markdown_to_text  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402


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


def structure(markdown: str) -> dict[str, list[str]]:
    """The headings and list items of ocrq's markdown, and whether it has a table."""
    headings = [m.group(1) for m in re.finditer(r"^#+\s+(.*)$", markdown, re.M)]
    items = [m.group(1) for m in re.finditer(r"^(?:[-*]|\d+[.)])\s+(.*)$", markdown, re.M)]
    return {"heading": headings, "item": items}


def score(page: dict, markdown: str) -> dict:
    text = markdown_to_text(markdown)
    units = page["units"]
    row = {"name": page["name"], "kind": page["kind"]}
    row["edits"], row["chars"] = cer(page["truth"], text)
    row["free_edits"], row["free_chars"] = order_free(page["truth"], text)
    row["word_edits"], row["words"] = wer(page["truth"], text)
    row["tau"] = kendall_tau([u["text"] for u in units], text)
    read = structure(markdown)
    for kind in ("heading", "item"):
        row[kind] = f1([re.sub(r"^(\d+[.)]|•)\s*", "", u["text"]) for u in units if u["kind"] == kind],
                       [re.sub(r"^(\d+[.)]|•)\s*", "", r) for r in read[kind]])
    if page["kind"] == "table_heading":
        heading = next(u["text"] for u in units if u["kind"] == "heading")
        tables = re.findall(r"<table>.*?</table>", markdown, re.S)
        row["heading_outside_table"] = heading.split()[0] not in " ".join(tables) and heading.split()[0] in markdown
    return row


def table(rows: list[dict]) -> str:
    kinds = sorted({r["kind"] for r in rows})
    head = ("| kind | pages | CER | order-free CER | WER | Kendall tau | heading F1 | list-item F1 |\n"
            "|---|---|---|---|---|---|---|---|")
    lines = [head]
    for kind in [*kinds, "all"]:
        group = [r for r in rows if kind in ("all", r["kind"])]

        def rate(e: str, n: str, group: list[dict] = group) -> str:
            return f"{sum(r[e] for r in group) / max(sum(r[n] for r in group), 1):.4f}"

        def f(k: str, group: list[dict] = group) -> str:
            m, t, r = (sum(row[k][i] for row in group) for i in range(3))
            return "-" if t == 0 and r == 0 else f"{2 * m / max(t + r, 1):.2f}"

        taus = [r["tau"] for r in group if r["tau"] is not None]
        lines.append(f"| {kind} | {len(group)} | {rate('edits', 'chars')} | {rate('free_edits', 'free_chars')} | "
                     f"{rate('word_edits', 'words')} | {statistics.mean(taus) if taus else float('nan'):.3f} | "
                     f"{f('heading')} | {f('item')} |")
    kept = [r["heading_outside_table"] for r in rows if "heading_outside_table" in r]
    if kept:
        lines.append(f"\ntable pages with the heading kept outside the table: {sum(kept)} of {len(kept)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--jsonl", type=Path)
    args = parser.parse_args()
    from PIL import Image

    index = json.loads((args.corpus / "index.json").read_text())
    engine = CpuEngine()
    rows = []
    out = args.jsonl.open("w") if args.jsonl else None
    for page in index["pages"]:
        [result] = engine.read([Image.open(args.corpus / f"{page['name']}.png").convert("RGB")])
        row = score(page, getattr(result, "text", ""))
        row["dropped_lines"] = getattr(result, "details", {}).get("dropped_lines")
        rows.append(row)
        print(f"{row['name']:>18} CER {row['edits'] / max(row['chars'], 1):.4f} tau {row['tau']}", file=sys.stderr,
              flush=True)
        if out:
            out.write(json.dumps(row | {"markdown": getattr(result, "text", "")}) + "\n")
    print(table(rows))
    dropped = [r["dropped_lines"] for r in rows if r["dropped_lines"] is not None]
    if dropped:
        print(f"pages with lines dropped: {sum(d > 0 for d in dropped)} of {len(dropped)}")


if __name__ == "__main__":
    main()
