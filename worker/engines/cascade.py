"""Two recognisers in rapidocr's one recogniser slot: a fast model reads every line, and the full model reads again
the lines the fast one is unsure of, whose reading is then kept.

PP-OCRv6's tiny recogniser reads a line in about a quarter of the small one's time, and most lines as the small
one does; it has no kana, and misreads some lines it is unsure of (BENCHMARKS.md, twelfth session).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# A line the fast recogniser reads with less confidence than this is read by the full one. On 2,529 lines of a
# corpus of another seed than the judged one (every language but Japanese), 0.97 sent 15 % of the lines to the
# full recogniser, and with them 870 of the 948 characters where the two models' readings differed; 0.95 sent 7 %
# and 761. Japanese lines (no kana in the fast model's characters) scored under 0.97 all but 3 characters' worth.
CONFIRM_BELOW = 0.97
# A line whose fast reading packs more characters than this into each of its heights of width is read by the full
# model too, however sure the fast one is. The recogniser makes one time step of each sixth of the line's height
# (48 px high, 8 px a step), and a doubled letter needs a blank step between its two: on condensed or tightly set
# lines the tiny model lost one ("staf", "ofice"), ran two together ("com" for "corn") or read a footnote's "¹"
# as "'", at 0.97-0.99. On the second generator's tuning seeds 1-3 (216 pages, 2,391 lines), sure lines this dense
# were 13 % of all lines and held 8 the small model read right and none it read wrong; at 2.75, 33 %, 13 and 1;
# at 3.25, 4 % and 3.
DENSE_ABOVE = 3.0
# CJK radicals onwards: Han, kana, hangul, full-width forms.
CJK = "\u2e80"


@dataclass
class Cascade:
    """rapidocr's TextRecognizer interface over a fast and a full one."""

    fast: object
    full: object
    below: float = CONFIRM_BELOW
    dense_above: float = DENSE_ABOVE
    confirmed: int = 0
    known: frozenset[str] = field(init=False, repr=False)  # the fast model's characters

    def __post_init__(self) -> None:
        decoder = self.fast.postprocess_op
        self.known = frozenset(getattr(decoder, "_decoder", decoder).character)  # under PeaksDecode on OpenVINO

    def __call__(self, args):
        from rapidocr.ch_ppocr_rec import TextRecOutput

        first = self.fast(args)
        images = [args.img] if isinstance(args.img, np.ndarray) else list(args.img)
        unsure = [i for i, (text, score) in enumerate(zip(first.txts, first.scores, strict=True))
                  if _unsure(text, score, images[i].shape, self.below)]
        crowded = [i for i, text in enumerate(first.txts)
                   if i not in unsure and dense(text, images[i].shape[1], images[i].shape[0], self.dense_above)]
        if not unsure and not crowded:
            return first
        readings, elapse = self._read_again(args, images, unsure) if unsure else ([], 0.0)
        if crowded:
            # A batch of their own: a batch is padded to its widest line, and a short heading read with the long
            # dense lines lost its space ("WinterMonths", which it read right in the unsure lines' batch).
            extra, seconds = self._read_again(args, images, crowded)
            readings, elapse = readings + extra, elapse + seconds
        if any(char not in self.known for _, text, _, _ in readings for char in text):
            # A script the fast model lacks (kana): its other CJK lines may hold it too, read as look-alike Han
            # characters with confidence ("トチー" as "卜于一" at 0.977).
            read = set(unsure) | set(crowded)
            more = [i for i, text in enumerate(first.txts) if i not in read and any(c >= CJK for c in text)]
            if more:
                extra, seconds = self._read_again(args, images, more)
                readings, elapse = readings + extra, elapse + seconds
        txts, scores, words = list(first.txts), list(first.scores), list(first.word_results)
        for i, text, score, word in readings:
            txts[i], scores[i], words[i] = text, score, word
        self.confirmed += len(readings)
        return TextRecOutput(images, tuple(txts), scores, tuple(words), (first.elapse or 0.0) + elapse,
                             viser=first.viser)

    def _read_again(self, args, images: list[np.ndarray], lines: list[int]) -> tuple[list[tuple], float]:
        """The full model's (line, text, score, word results) for these lines, and its seconds."""
        from rapidocr.ch_ppocr_rec import TextRecInput

        out = self.full(TextRecInput(img=[images[i] for i in lines], return_word_box=args.return_word_box))
        return list(zip(lines, out.txts, out.scores, out.word_results, strict=True)), out.elapse or 0.0


def _unsure(text: str, score: float, shape: tuple[int, ...], below: float) -> bool:
    height, width = shape[:2]
    return score < below or sparse(text, width, height)


def sparse(text: str, width: float, height: float) -> bool:
    """A garbled reading: many spaces and few characters for the line's length (a line of any script holds more
    than one glyph per four heights)."""
    return width > 4 * height and len(text.replace(" ", "")) < 0.25 * width / max(height, 1)


def dense(text: str, width: float, height: float, above: float = DENSE_ABOVE) -> bool:
    """A reading with more characters for the line's length than the recogniser's time steps hold surely
    (DENSE_ABOVE)."""
    return len(text) > above * width / max(height, 1)
