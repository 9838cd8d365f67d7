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
# CJK radicals onwards: Han, kana, hangul, full-width forms.
CJK = "\u2e80"


@dataclass
class Cascade:
    """rapidocr's TextRecognizer interface over a fast and a full one."""

    fast: object
    full: object
    below: float = CONFIRM_BELOW
    confirmed: int = 0
    _known: frozenset[str] | None = field(default=None, repr=False)

    def __call__(self, args):
        from rapidocr.ch_ppocr_rec import TextRecInput, TextRecOutput

        first = self.fast(args)
        images = [args.img] if isinstance(args.img, np.ndarray) else list(args.img)
        unsure = [i for i, (text, score) in enumerate(zip(first.txts, first.scores, strict=True))
                  if _unsure(text, score, images[i].shape, self.below)]
        if not unsure:
            return first
        again = self.full(TextRecInput(img=[images[i] for i in unsure], return_word_box=args.return_word_box))
        elapse = (first.elapse or 0.0) + (again.elapse or 0.0)
        if any(char not in self._characters for text in again.txts for char in text):
            # A script the fast model lacks (kana): its other CJK lines may hold it too, read as look-alike Han
            # characters with confidence ("トチー" as "卜于一" at 0.977).
            more = [i for i, text in enumerate(first.txts) if i not in unsure and any(c >= CJK for c in text)]
            if more:
                extra = self.full(TextRecInput(img=[images[i] for i in more], return_word_box=args.return_word_box))
                unsure, elapse = unsure + more, elapse + (extra.elapse or 0.0)
                again = _joined(again, extra)
        txts, scores, words = list(first.txts), list(first.scores), list(first.word_results)
        for k, i in enumerate(unsure):
            txts[i], scores[i], words[i] = again.txts[k], again.scores[k], again.word_results[k]
        self.confirmed += len(unsure)
        return TextRecOutput(images, tuple(txts), scores, tuple(words), elapse, viser=first.viser)

    @property
    def _characters(self) -> frozenset[str]:
        if self._known is None:
            decoder = self.fast.postprocess_op
            self._known = frozenset(getattr(decoder, "_decoder", decoder).character)
        return self._known


def _joined(a, b):
    from rapidocr.ch_ppocr_rec import TextRecOutput

    return TextRecOutput(None, tuple(a.txts) + tuple(b.txts), list(a.scores) + list(b.scores),
                         tuple(a.word_results) + tuple(b.word_results))


def _unsure(text: str, score: float, shape: tuple[int, ...], below: float) -> bool:
    height, width = shape[:2]
    return score < below or sparse(text, width, height)


def sparse(text: str, width: float, height: float) -> bool:
    """A garbled reading: many spaces and few characters for the line's length (a line of any script holds more
    than one glyph per four heights)."""
    return width > 4 * height and len(text.replace(" ", "")) < 0.25 * width / max(height, 1)
