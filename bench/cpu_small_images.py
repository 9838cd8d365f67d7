"""Small images (a label, a caption, a cut-out of one to three lines) read by ocrq's CPU engine at several
detection scales, and by Tesseract, side by side in one run.

Each image is drawn from a seed: a sentence of bench/cpu_corpus.py's 11 languages, in one of its 13 Latin
fonts or Noto Sans CJK, 11-44 px, one to three lines of one to five words, 4-30 px margins, line pitch 1.2-1.6.
Every engine variant (JSON: rapidocr settings; {} is the engine as the worker runs it) reads every image, the
order rotating image by image; Tesseract reads it with the image's own language, `--psm 6`. CER is
order-sensitive, whitespace ignored; seconds are the mean per image. Table by text size.

    .venv/bin/python bench/cpu_small_images.py --images 200 --seed 11 \
        --variant '{"Det.limit_side_len": 736}' --variant '{"Det.limit_side_len": 320}' --variant '{}'
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import cpu_corpus as corpus
from bench.cpu_peers import tesseract
from common.formats.plain import markdown_to_text
from tests.support.text import levenshtein, normalise
from worker.engines.cpu import CpuEngine

SIZES = [11, 13, 16, 20, 26, 34, 44]


def snippets(count: int, seed: int) -> list[tuple[Image.Image, str, str, int]]:
    """(image, truth, language, text size in px)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        lang = rng.choice(corpus.LANGS)
        cjk = lang in corpus.CJK
        px = rng.choice(SIZES)
        font = (ImageFont.truetype(str(corpus.CJK_FONTS["noto-sans-cjk"]), px, index=corpus.CJK_FACE[lang]) if cjk
                else ImageFont.truetype(str(rng.choice(list(corpus.LATIN_FONTS.values()))), px))
        sentence = corpus._fill(rng, rng.choice(corpus.TEXT[lang]))
        words = [sentence[i:i + 4] for i in range(0, len(sentence), 4)] if cjk else sentence.split(" ")
        per_line = rng.randint(1, min(5, len(words)))
        lines = [("" if cjk else " ").join(words[n * per_line:(n + 1) * per_line]) or words[0]
                 for n in range(rng.choice([1, 1, 2, 3]))]
        margin, pitch = rng.randint(4, 30), int(px * rng.uniform(1.2, 1.6))
        image = Image.new("RGB", (max(font.getbbox(line)[2] for line in lines) + 2 * margin,
                                  pitch * len(lines) + 2 * margin), "white")
        draw = ImageDraw.Draw(image)
        for n, line in enumerate(lines):
            draw.text((margin, margin + n * pitch), line, font=font, fill="black")
        out.append((image, "\n".join(lines), lang, px))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--variant", action="append", help="rapidocr settings as JSON; {} is the worker's engine")
    parser.add_argument("--no-tesseract", action="store_true")
    args = parser.parse_args()
    images = snippets(args.images, args.seed)
    readers = {}
    for variant in args.variant or ["{}"]:
        engine = CpuEngine(params_override=json.loads(variant))
        readers[variant] = lambda image, _path, _lang, engine=engine: markdown_to_text(
            getattr(engine.read([image])[0], "text", ""))
    if not args.no_tesseract:
        readers["tesseract --psm 6"] = lambda _image, path, lang: tesseract(path, lang, psm="6")
    names = list(readers)
    totals = {name: [0, 0, 0.0] for name in names}
    by_size = {(px, name): [0, 0] for px in SIZES for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for n, (image, truth, lang, px) in enumerate(images):
            path = Path(tmp) / f"{n}.png"
            image.save(path)
            ref = normalise(truth)
            for name in names[n % len(names):] + names[:n % len(names)]:
                started = time.perf_counter()
                text = readers[name](image, path, lang)
                seconds = time.perf_counter() - started
                edits = levenshtein(ref, normalise(text))
                totals[name] = [totals[name][0] + edits, totals[name][1] + len(ref), totals[name][2] + seconds]
                by_size[px, name][0] += edits
                by_size[px, name][1] += len(ref)
    print(f"{len(images)} images, seed {args.seed}; Tesseract {'off' if args.no_tesseract else 'with each language'}")
    print("| reader | CER | s/image |" + "".join(f" {px} px |" for px in SIZES))
    print("|---|---|---|" + "---|" * len(SIZES))
    for name in names:
        edits, chars, seconds = totals[name]
        cells = [f"{by_size[px, name][0] / max(by_size[px, name][1], 1):.4f}" for px in SIZES]
        print(f"| `{name}` | {edits / chars:.4f} | {seconds / len(images):.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
