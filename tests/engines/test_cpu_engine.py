"""The CPU engine (rapidocr) reads all eleven languages of the mission from pages rendered with known text."""

from __future__ import annotations

import signal

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from PIL import Image

from tests.documents.hostile import FONT_CJK, FONT_LATIN, text_page
from tests.support.pages import PARAGRAPHS, column_page
from tests.support.text import cer
from worker.engines.base import EngineError, PageText
from worker.engines.cpu import CpuEngine

SENTENCES = {
    "en": ("The invoice is due within thirty days of delivery.", FONT_LATIN),
    "fr": ("La facture est payable à réception, où qu'elle soit.", FONT_LATIN),
    "de": ("Die Rechnung ist innerhalb von vierzehn Tagen fällig.", FONT_LATIN),
    "es": ("La factura vence en treinta días después de la entrega.", FONT_LATIN),
    "it": ("La fattura è pagabile entro trenta giorni dalla consegna.", FONT_LATIN),
    "nl": ("De factuur moet binnen dertig dagen worden betaald.", FONT_LATIN),
    "pt": ("A fatura vence em trinta dias após a entrega.", FONT_LATIN),
    "sv": ("Fakturan ska betalas inom trettio dagar efter leverans.", FONT_LATIN),
    "da": ("Fakturaen forfalder til betaling inden for tredive dage.", FONT_LATIN),
    "zh": ("发票应在交货后三十天内付款。", FONT_CJK),
    "ja": ("請求書は納品後三十日以内にお支払いください。", FONT_CJK),
}


@pytest.fixture(scope="module")
def engine():
    engine = CpuEngine()
    yield engine
    engine.close()


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_reads_each_language(engine, lang):
    sentence, font = SENTENCES[lang]
    page = text_page(sentence, font=font, size=(1190, 400), font_size=40)
    [result] = engine.read([page])
    assert isinstance(result, PageText), result
    assert cer(sentence, result.text) <= 0.05, result.text
    assert result.engine == "cpu" and result.seconds > 0


def test_mixed_page_and_modes(engine):
    lines = [SENTENCES[k][0] for k in ("en", "fr")]
    latin = text_page("\n".join(lines), size=(1190, 500), font_size=40)
    cjk = text_page(SENTENCES["ja"][0], font=FONT_CJK, size=(1190, 300), font_size=40)
    page = Image.new("RGB", (1190, 800), "white")
    page.paste(latin, (0, 0))
    page.paste(cjk, (0, 500))
    # Palette and greyscale inputs read the same as RGB: the engine is given arrays, never paths.
    results = engine.read([page, page.convert("P"), page.convert("L")])
    texts = [r.text for r in results]
    for text in texts:
        assert cer("".join(lines) + SENTENCES["ja"][0], text) <= 0.05, text


def test_blank_page_reads_as_empty(engine):
    [result] = engine.read([Image.new("RGB", (800, 600), "white")])
    assert not isinstance(result, EngineError) and result.text == ""


def test_soft_time_limit_inside_rapidocr_reaches_the_task(engine):
    """Celery raises the soft limit from a signal handler wherever the worker is; inside onnxruntime's call,
    rapidocr re-raises it as its own error. It must still reach the task as a time limit, not an engine failure."""
    page = text_page("The soft limit fires while the detector runs.\n" * 12, size=(1190, 1540), font_size=30)
    fired = []

    def soft_limit(signum, frame):
        inside = frame
        while inside is not None and "rapidocr/inference_engine" not in inside.f_code.co_filename:
            inside = inside.f_back
        if inside is None or inside.f_code.co_name != "__call__":
            signal.setitimer(signal.ITIMER_REAL, 0.005)  # not inside rapidocr's model call: try again soon
            return
        fired.append(inside.f_code.co_name)
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, soft_limit)
    signal.setitimer(signal.ITIMER_REAL, 0.005)
    try:
        with pytest.raises(SoftTimeLimitExceeded):
            engine.read([page])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == ["__call__"]


def test_the_default_runtime_is_openvino_and_reads_as_onnxruntime_does(engine):
    """The models run on OpenVINO (bf16 where the CPU has it); the text must be what onnxruntime's fp32 reads."""
    from worker.engines.inference import OpenVinoSession

    assert isinstance(engine._ocr.text_det.session.session, OpenVinoSession)
    assert isinstance(engine._ocr.text_rec.fast.session.session, OpenVinoSession)
    assert isinstance(engine._ocr.text_rec.full.session.session, OpenVinoSession)
    lines = [SENTENCES[k][0] for k in ("en", "de", "es", "da")]
    page = text_page("\n".join(lines), size=(1190, 700), font_size=34)
    reference = CpuEngine(runtime="onnxruntime")
    try:
        assert not isinstance(reference._ocr.text_det.session.session, OpenVinoSession)
        [ours], [theirs] = engine.read([page]), reference.read([page])
    finally:
        reference.close()
    assert cer("".join(lines), ours.text) <= 0.02, ours.text
    assert cer(theirs.text, ours.text) <= 0.01, (ours.text, theirs.text)


def test_the_recogniser_returns_only_each_steps_peak_and_reads_the_same(engine):
    """OpenVINO returns the recogniser's best character at each time step and its probability, not the softmax
    over all 18,710 characters; the texts and scores must be those the whole softmax gives."""
    import numpy as np
    from rapidocr.ch_ppocr_rec import TextRecInput
    from rapidocr.utils.process_img import get_rotate_crop_image

    from worker.engines.inference import OpenVinoSession, Peaks

    recogniser = engine._ocr.text_rec.full
    lines = [SENTENCES[k][0] for k in ("en", "de", "fr", "sv", "da")]
    page = np.asarray(text_page("\n".join(lines), size=(1190, 600), font_size=34).convert("RGB"))
    quads = engine._ocr(page).boxes
    crops = [get_rotate_crop_image(page, quad.astype(np.float32)) for quad in quads]
    assert len(crops) == len(lines)
    ours = recogniser(TextRecInput(img=crops))
    peaks = recogniser.session.session
    whole = OpenVinoSession(peaks.path, threads=1)
    feed = np.stack([recogniser.resize_norm_img(crop, 1190 / 48) for crop in crops]).astype(np.float32)
    [softmax] = whole.run(None, {"x": feed})
    [top] = peaks.run(None, {"x": feed})
    assert isinstance(top, Peaks) and softmax.shape[-1] > 18000
    assert (top.indices == softmax.argmax(axis=2)).all()
    assert np.allclose(top.probs, softmax.max(axis=2), atol=1e-6)
    assert [cer(truth, text) for truth, text in zip(lines, ours.txts, strict=True)] == [0.0] * len(lines), ours.txts
    assert all(score > 0.9 for score in ours.scores), ours.scores


def _convolution_precisions(session) -> set[str]:
    """What the recogniser's convolutions run in, as OpenVINO compiled them."""
    model = session._compiled.get_runtime_model()
    return {str(op.get_rt_info()["runtimePrecision"].astype(str)) for op in model.get_ordered_ops()
            if op.get_rt_info()["layerType"].astype(str) == "Convolution"}


def test_asked_for_the_recognisers_convolutions_run_in_int8_and_read_every_language(engine):
    """OCRQ_CPU_INT8 quantises the recogniser's convolutions to int8 (bench/cpu_quantise.py); by default they run
    as rapidocr ships them. Quantised, pages of every language must still read as the shipped model reads them."""
    assert not engine._ocr.text_rec.full.session.session.quantised
    assert "u8" not in _convolution_precisions(engine._ocr.text_rec.full.session.session)
    quantised = CpuEngine(quantised=True)
    try:
        session = quantised._ocr.text_rec.full.session.session
        assert session.quantised and "u8" in _convolution_precisions(session)
        for langs, font in (("en de fr es it", FONT_LATIN), ("nl pt sv da", FONT_LATIN), ("zh ja", FONT_CJK)):
            lines = [SENTENCES[lang][0] for lang in langs.split()]
            page = text_page("\n".join(lines), font=font, size=(1190, 120 + 90 * len(lines)), font_size=34)
            [ours], [theirs] = quantised.read([page]), engine.read([page])
            assert cer("".join(lines), ours.text) <= 0.02, ours.text
            assert cer(theirs.text, ours.text) <= 0.01, (ours.text, theirs.text)
    finally:
        quantised.close()


def test_a_recogniser_other_than_the_one_quantised_runs_as_it_is(tmp_path, caplog):
    """The quantisation's numbers fit only the model they were made from: any other runs unquantised."""
    from worker.engines.inference import quantisation_for

    other = tmp_path / "PP-OCRv6_rec_small.onnx"
    other.write_bytes(b"another model")
    assert quantisation_for(str(other)) is None
    assert "runs unquantised" in caplog.text


def test_the_detectors_input_is_rapidocrs(engine):
    """DetectorInput looks each value up in a table; the model must get exactly what rapidocr's own gives."""
    import numpy as np

    detector = engine._ocr.text_det
    page = np.random.default_rng(5).integers(0, 256, (333, 517, 3), dtype=np.uint8)
    ours = detector.get_preprocess()(page)
    theirs = type(detector).get_preprocess(detector)(page)
    assert ours.shape == theirs.shape == (1, 3, 320, 512) and ours.dtype == np.float32
    assert np.array_equal(ours, theirs)


def test_recognition_batches_come_in_a_few_shapes(engine, monkeypatch):
    """OpenVINO prepares its kernels for each input shape it has not met, in about a batch's time again: the
    recognisers' batches are padded to widths in steps of WIDTH_STEP and to 1, 2, 4 or 6 lines, and the page
    reads right."""
    from worker.engines import inference

    shapes = []
    padded = inference._padded_batch

    def spy(batch):
        out = padded(batch)
        shapes.append((len(batch), out.shape))
        return out

    monkeypatch.setattr(inference, "_padded_batch", spy)
    langs, lengths = ("en", "fr", "de", "es", "it", "nl", "pt"), (51, 44, 37, 30, 23, 16, 9)
    lines = [SENTENCES[k][0][:n] for k, n in zip(langs, lengths, strict=True)]
    page = text_page("\n".join(lines), size=(1190, 800), font_size=34)
    [result] = engine.read([page])
    assert cer("".join(lines), result.text.replace("\n", "")) <= 0.02, result.text
    assert {count for count, _ in shapes} >= {6, 1}  # seven lines: a batch of six and one of one
    for count, (lines_in, channels, height, width) in shapes:
        assert lines_in in (1, 2, 4, 6) and lines_in - count in (0, 1)
        assert width % inference.WIDTH_STEP == 0 and (channels, height) == (3, 48)


def test_text_showing_through_from_the_back_of_the_sheet_is_not_read(engine):
    """The back page, mirrored and faint between the front's lines (thin paper): the detector finds its lines and
    the recogniser read them as noise (a corpus page went from CER 0.25 to 0.003 once such lines were dropped)."""
    import numpy as np

    lines = [SENTENCES[k][0] for k in ("en", "fr", "de", "es", "it", "nl")]
    front = text_page("\n".join(lines), size=(1190, 900), font_size=34)
    back = Image.new("RGB", front.size, "white")
    back.paste(text_page("\n".join(reversed(lines)), size=(1190, 900), font_size=34), (0, 25))
    mirrored = np.asarray(back.convert("L").transpose(Image.Transpose.FLIP_LEFT_RIGHT), dtype=np.float32)
    sheet = np.minimum(np.asarray(front.convert("L"), dtype=np.float32), 255 - (255 - mirrored) * 0.2)
    [result] = engine.read([Image.fromarray(sheet.astype(np.uint8))])
    assert cer("".join(lines), result.text) <= 0.02, result.text


@pytest.fixture(scope="module")
def small_engine():
    engine = CpuEngine(fast=False)
    yield engine
    engine.close()


@pytest.mark.parametrize("columns, font_size, fast", [(2, 24, True), (3, 22, False), (3, 22, True)])
def test_lines_joined_across_a_narrow_gutter_are_cut_at_it(engine, small_engine, columns, font_size, fast):
    """A gutter of 30 px: the detector took lines of neighbouring columns into one box, the reading order then
    saw no gutter, and the page read across its columns (CER 0.15 and 0.38; clean corpus pages at 0.37-0.41).
    On the page scaled for the fast engine's detector, the three columns' lines come apart by themselves."""
    page = column_page(columns, gutter=30, font_size=font_size)
    [result] = (engine if fast else small_engine).read([page.image])
    if columns == 2 or not fast:
        assert result.details["split_lines"] >= 1
    assert cer(page.truth, result.text) <= 0.02, result.text


def test_text_showing_through_across_three_columns_is_not_read_into_them(engine):
    """Thin paper behind a three-column page: the back's long lines cross every gutter, and the detector joined
    them and the front's lines into boxes spanning the columns, which the recogniser garbled (CER 0.81; two
    corpus pages in Spanish at 0.73 and 0.67). Dropping faint lines after detection cannot split such a box."""
    import numpy as np

    front = column_page(3, paragraphs=PARAGRAPHS[:4], font_size=18)
    back = text_page("\n".join(p[:70] for p in PARAGRAPHS[2:] * 3), size=front.image.size, font_size=30)
    mirrored = np.asarray(back.convert("L").transpose(Image.Transpose.FLIP_LEFT_RIGHT), dtype=np.float32)
    sheet = np.minimum(np.asarray(front.image.convert("L"), dtype=np.float32), 255 - (255 - mirrored) * 0.2)
    [result] = engine.read([Image.fromarray(sheet.astype(np.uint8))])
    assert cer(front.truth, result.text) <= 0.02, result.text


BRIDGED = [["Please send", "the signed", "responsibilities", "back to us by", "the end of", "the month so", "we can file",
            "it in time."],
           ["Our office", "reviews each", "acknowledgements", "listed in the", "contract and", "replies within",
            "two working", "days of it."],
           ["A copy of", "this letter", "went to the", "legal office", "and to the", "clerk who", "keeps the",
            "records."]]


def _bridged_page(row: int) -> tuple[Image.Image, str]:
    """Three columns whose gutters are 8 px wide on one row, where the long words of the first two columns fill
    them (the corpus's p035-de and p107-da: the detector made that row one box, and the page read by rows)."""
    from PIL import ImageDraw, ImageFont

    from tests.support.pages import SERIF

    face = ImageFont.truetype(SERIF, 22)
    order = [i for i in range(len(BRIDGED[0])) if i != 2]
    order.insert(row, 2)
    columns = [[column[i] for i in order] for column in BRIDGED]
    page = Image.new("RGB", (720, 340), "white")
    draw = ImageDraw.Draw(page)
    x = 60
    for column in columns:
        width = max(draw.textlength(ln, font=face) for ln in column)
        for i, ln in enumerate(column):
            draw.text((x, 50 + 32 * i), ln, font=face, fill="black")
        x += int(width) + 8
    return page, "\n".join(ln for column in columns for ln in column)


@pytest.mark.parametrize("row, fast", [(2, True), (7, True), (2, False)])
def test_a_row_that_bridges_the_gutters_is_cut_at_them(engine, small_engine, row, fast):
    page, truth = _bridged_page(row)
    [result] = (engine if fast else small_engine).read([page])
    assert result.details["split_lines"] >= 1
    assert cer(truth, result.text) <= 0.02, result.text
