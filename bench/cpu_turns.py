"""How sure the CPU engine's reading of a page is at a right turn and at a wrong one (worker.engines.cpu.SURE_TURN).

Each turned corpus page is read at the orientation classifier's turn; every seventh upright page is read turned
90 and 180 degrees on purpose. Sureness is the reading's confidence, its lines weighted by their characters.

    .venv/bin/python bench/cpu_turns.py --corpus /tmp/corpus35
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.engines.cpu import CpuEngine, _sureness


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--every", type=int, default=7, help="upright pages: one in this many")
    args = parser.parse_args()
    pages = [p for p in json.loads((args.corpus / "index.json").read_text())["pages"] if p["group"] != "real scan"]
    engine = CpuEngine()
    right, wrong, misread = [], [], []
    for n, page in enumerate(pages):
        if not page["turn"] and n % args.every:
            continue
        array = np.asarray(Image.open(args.corpus / f"{page['name']}.png").convert("RGB"))
        rotation = engine._rotation(array)
        if (rotation + page["turn"]) % 360:
            misread.append(page["name"])  # the classifier's turn is wrong
        if rotation:
            right.append(_sureness(engine._detect_and_read(np.rot90(array, k=rotation // 90))))
        elif not page["turn"]:
            wrong += [_sureness(engine._detect_and_read(np.rot90(array, k=k))) for k in (1, 2)]
        print(f"{page['name']} turn {page['turn']} classifier {rotation}", flush=True)
    print(f"turned pages read at the classifier's turn: {len(right)}, sureness {min(right):.3f}-{max(right):.3f}, "
          f"median {np.median(right):.3f}, at 0.97 or more {sum(s >= 0.97 for s in right)}")
    print(f"upright pages turned on purpose: {len(wrong)} readings, sureness {min(wrong):.3f}-{max(wrong):.3f}, "
          f"median {np.median(wrong):.3f}")
    print(f"pages the classifier turned wrongly: {len(misread)} {misread}")


if __name__ == "__main__":
    main()
