"""The reading order's steps switched off one at a time on bench/cpu_corpus.py's pages (issue 56): each page read
once by the CPU engine (its detector's and recogniser's readings kept), then ordered with every step and with each
one off; order-sensitive CER by step, as bench/cpu_peers.py scores it. bench/layout_scores.py --ablate does the
same on the second generator's pages.

    .venv/bin/python bench/order_ablation.py --corpus /tmp/corpus [--limit 80]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu_peers import edits, rendered, select  # noqa: E402
from bench.layout_scores import reading_once  # noqa: E402
from common.formats.plain import markdown_to_text  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402
from worker.engines.reading_order import PARAMS, STEPS, Params  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    from PIL import Image

    pages = select(args.corpus, groups=None, limit=args.limit)
    engine = reading_once(CpuEngine())
    variants = {"(none)": PARAMS.steps, **{step: PARAMS.steps - {step} for step in STEPS}}
    totals = {name: [0, 0, 0] for name in variants}  # edits, characters, pages changed against all steps on
    with tempfile.TemporaryDirectory() as tmp:
        for page, path in zip(pages, rendered(args.corpus, pages, Path(tmp)), strict=True):
            truth = (args.corpus / f"{page['name']}.txt").read_text(encoding="utf-8")
            image = Image.open(path).convert("RGB")
            base = None
            for name, steps in variants.items():
                engine._order = Params(steps=steps)
                [result] = engine.read([image])
                n, chars = edits(truth, markdown_to_text(getattr(result, "text", "")))
                base = n if base is None else base
                totals[name][0] += n
                totals[name][1] += chars
                totals[name][2] += n != base
            kept.clear()
            print(f"{page['name']:>10}", file=sys.stderr, flush=True)
    print(f"pages: {len(pages)}\n\n| step off | CER | edits | pages whose edits changed |\n|---|---|---|---|")
    for name, (n, chars, changed) in totals.items():
        print(f"| {name} | {n / max(chars, 1):.4f} | {n} | {changed} |")


if __name__ == "__main__":
    main()
