"""The CPU engine: rapidocr on onnxruntime, whose wheel ships its models (no network at run time)."""

from __future__ import annotations

import time

import numpy as np
from PIL import Image

from worker.engines.base import EngineError, PageText


class CpuEngine:
    name = "cpu"

    def __init__(self, *, threads: int = 0) -> None:
        from rapidocr import RapidOCR

        params = {"Global.log_level": "warning"}
        if threads > 0:
            params |= {"EngineConfig.onnxruntime.intra_op_num_threads": threads}
        self._ocr = RapidOCR(params=params)
        self.model = "rapidocr-3.10/PP-OCRv6"

    def read(self, images: list[Image.Image]) -> list[PageText | EngineError]:
        return [self._read_one(image) for image in images]

    def _read_one(self, image: Image.Image) -> PageText | EngineError:
        started = time.perf_counter()
        try:
            # An array, never a path: a palette PNG given as a path reads as empty.
            output = self._ocr(np.asarray(image.convert("RGB")))
        except Exception as exc:  # onnxruntime raises plain RuntimeError/ValueError on odd inputs
            return EngineError(f"rapidocr failed: {exc}", kind="engine")
        text = output.to_markdown() if output.txts else ""
        return PageText(text=text, engine=self.name, model=self.model, seconds=time.perf_counter() - started,
                        details={"lines": len(output.txts or ())})

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        self._ocr = None
