"""Line boxes for engines that read text without positions (vLLM): rapidocr's detector alone, on the CPU,
run only for jobs that asked for a PDF; the engine's words are then laid onto the boxes in order
(common/pdf_output/placement.py). Box order is rapidocr's: top to bottom, left to right within a row.
"""

from __future__ import annotations

import time

import numpy as np
from PIL import Image

from common.pdf_output.placement import Box, place_words
from common.results import markdown_to_text


class LineDetector:
    """rapidocr's text detection model only: no angle classifier, no recogniser."""

    def __init__(self, *, threads: int = 0) -> None:
        from rapidocr import RapidOCR

        params = {"Global.log_level": "warning", "Global.use_cls": False, "Global.use_rec": False}
        if threads > 0:
            params |= {"EngineConfig.onnxruntime.intra_op_num_threads": threads}
        self._ocr = RapidOCR(params=params)

    def boxes(self, image: Image.Image) -> list[Box]:
        output = self._ocr(np.asarray(image.convert("RGB")), use_det=True, use_cls=False, use_rec=False)
        if output.boxes is None:
            return []
        return [(int(b[:, 0].min()), int(b[:, 1].min()), int(b[:, 0].max()), int(b[:, 1].max())) for b in output.boxes]

    def text_layer(self, image: Image.Image, text: str) -> dict:
        """The page's text placed on its detected lines, as stored in pages.text_layer."""
        started = time.perf_counter()
        boxes = self.boxes(image)
        lines = place_words(markdown_to_text(text), boxes, size=image.size)
        return {"rotation": 0, "lines": [{"text": t, "box": list(b)} for t, b in lines],
                "boxes": len(boxes), "seconds": round(time.perf_counter() - started, 4)}


