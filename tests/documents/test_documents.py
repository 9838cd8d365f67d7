"""Tests of common.documents: sniffing, submit-time checks, page ranges and rendering, hostile files included."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from common.documents import (
    REJECTION_CODES,
    DocumentInfo,
    DocumentRejected,
    Limits,
    PageRangeError,
    inspect,
    inspection,
    parse_page_ranges,
    render_page,
    rendering,
    sniff,
)
from common.documents.isolation import run_isolated
from common.settings import Settings
from tests.documents import hostile
from tests.support.stack import ROOT

LIMITS = Limits()


def pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def similarity(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference in 0-255 after bringing b to a's size; 0 means identical."""
    return float(np.abs(pixels(a) - pixels(b.convert("RGB").resize(a.size, Image.Resampling.LANCZOS))).mean())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("documents")


@pytest.fixture(scope="module")
def normal_pdf(corpus) -> Path:
    return hostile.pdf_of([hostile.text_page("A normal page of text after a hostile one.")], corpus / "normal.pdf")


def assert_still_renders(normal_pdf: Path) -> None:
    page = render_page(normal_pdf, 0, limits=LIMITS)
    assert (page.width, page.height) == (1190, 1540)
    assert pixels(page.image).min() < 64  # text was drawn


# --- hostile files: the exact code at submit and at render, then a normal page still renders ---

REFUSED_AT_SUBMIT = {
    "huge_mono_pdf": ("huge.pdf", "decompression_bomb"),
    "wide_page_pdf": ("wide.pdf", "page_too_large"),
    "thin_page_pdf": ("thin.pdf", "page_aspect_ratio"),
    "invalid_pdf": ("invalid.pdf", "invalid_pdf"),
    "encrypted_pdf": ("encrypted.pdf", "encrypted_pdf"),
    "zero_page_pdf": ("zero.pdf", "empty_pdf"),
    "png_bomb": ("bomb.png", "decompression_bomb"),
    "truncated_jpeg": ("truncated.jpg", "corrupt_image"),
    "truncated_png": ("truncated.png", "corrupt_image"),
    "text_named_png": ("text.png", "unsupported_type"),
    "empty_file": ("empty.pdf", "empty_file"),
}


@pytest.mark.parametrize("maker", sorted(REFUSED_AT_SUBMIT))
def test_hostile_file_is_refused_at_submit_and_render(maker, corpus, normal_pdf):
    name, code = REFUSED_AT_SUBMIT[maker]
    path = getattr(hostile, maker)(corpus / name)
    with pytest.raises(DocumentRejected) as submitted:
        inspect(path, limits=LIMITS)
    assert submitted.value.code == code
    assert code in REJECTION_CODES
    assert len(str(submitted.value)) > 15
    with pytest.raises(DocumentRejected) as rendered:
        render_page(path, 0, limits=LIMITS)
    assert rendered.value.code == code
    assert_still_renders(normal_pdf)


def test_huge_pdf_image_is_refused_only_above_the_pixel_limit(corpus):
    path = hostile.huge_mono_pdf(corpus / "huge-ok.pdf")
    assert inspect(path, limits=Limits(max_page_pixels=35_000**2)).page_count == 1
    with pytest.raises(DocumentRejected) as refused:
        inspect(path, limits=Limits(max_page_pixels=35_000**2 - 1))
    assert refused.value.code == "decompression_bomb"
    assert "35,000 × 35,000" in refused.value.message


@pytest.mark.parametrize(("black", "value"), [(False, 255), (True, 0)])
def test_small_mono_image_pdf_renders_its_pixels(black, value, corpus):
    path = hostile.mono_image_pdf(corpus / f"mono-{black}.pdf", pixels=3500, dpi=300, black=black)
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == (1540, 1540)
    assert np.unique(pixels(page.image)).tolist() == [value]


def test_bomb_limits_leave_pillow_global_alone(corpus):
    before = Image.MAX_IMAGE_PIXELS
    path = hostile.png_bomb(corpus / "bomb-global.png", side=20_000)
    with pytest.raises(DocumentRejected):
        inspect(path, limits=Limits(max_page_pixels=1_000_000))
    assert Image.MAX_IMAGE_PIXELS == before


def test_image_limit_is_ours_not_pillows(corpus):
    # 14,000² = 196 M pixels: above Pillow's own bomb error threshold (2 × 89.5 M), under ours.
    path = hostile.png_bomb(corpus / "big-but-allowed.png", side=14_000)
    info = inspect(path, limits=Limits(max_page_pixels=200_000_000))
    assert info == DocumentInfo(kind="png", page_count=1, mime="image/png")


def test_too_many_pages(corpus):
    tiff = hostile.multipage_tiff(corpus / "three.tiff")
    pdf = hostile.text_pdf(corpus / "three.pdf", ["one", "two", "three"])
    for path in (tiff, pdf):
        assert inspect(path, limits=Limits(max_pages=3)).page_count == 3
        with pytest.raises(DocumentRejected) as refused:
            inspect(path, limits=Limits(max_pages=2))
        assert refused.value.code == "too_many_pages"


def test_owner_password_only_pdf_is_rendered(corpus):
    path = hostile.owner_encrypted_pdf(corpus / "owner.pdf")
    assert inspect(path, limits=LIMITS).page_count == 1
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == (1190, 1540)
    # The black rectangle drawn by the encrypted content stream: 72..272 x 600..700 pt.
    assert pixels(page.image)[200, 300].tolist() == [0, 0, 0]


def test_page_index_out_of_range(corpus, normal_pdf):
    gif = hostile.animated_gif(corpus / "range.gif")
    for path in (normal_pdf, gif):
        with pytest.raises(DocumentRejected) as refused:
            render_page(path, 1, limits=LIMITS)
        assert refused.value.code == "page_out_of_range"


# --- renders hanging, crashing or eating memory end as DocumentRejected; the caller lives ---


def _hang(*args, **kwargs):
    time.sleep(60)


def _crash(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGSEGV)


def _eat_memory(*args, **kwargs):
    return bytearray(8 << 30)


def _children() -> set[int]:
    """Pids whose parent is this process (the suite may run servers of its own beside these tests)."""
    me, found = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


def _no_children_left(before: set[int]) -> bool:
    return _children() <= before


def test_hung_render_times_out(monkeypatch, normal_pdf):
    monkeypatch.setattr(rendering, "_render", _hang)
    before = _children()
    started = time.monotonic()
    with pytest.raises(DocumentRejected) as refused:
        render_page(normal_pdf, 0, limits=Limits(render_timeout_s=0.5))
    assert refused.value.code == "render_timeout"
    assert time.monotonic() - started < 5
    assert _no_children_left(before)
    monkeypatch.undo()
    assert_still_renders(normal_pdf)


def test_a_hung_render_leaves_its_stack_on_stderr(monkeypatch, normal_pdf, capfd):
    monkeypatch.setattr(rendering, "_render", _hang)
    with pytest.raises(DocumentRejected):
        render_page(normal_pdf, 0, limits=Limits(render_timeout_s=0.5))
    assert "in _hang" in capfd.readouterr().err


class _LockingGarbage:
    """An unreachable cycle whose finalizer takes a lock: only the garbage collector frees it."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock, self.me = lock, self

    def __del__(self) -> None:
        with self.lock:
            pass


def _collect() -> str:
    gc.collect()
    return "collected"


def test_a_child_does_not_finalize_the_parents_garbage():
    # Another thread holds the lock at the fork; in the child nobody ever releases it.
    lock, held, release = threading.Lock(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(5)
    gc.disable()
    try:
        _LockingGarbage(lock)
        assert run_isolated(_collect, timeout_s=10, max_pixels=1, what="collecting") == "collected"
    finally:
        release.set()
        holder.join()
        gc.enable()
        gc.collect()


def test_a_child_does_not_log_into_the_descriptors_it_closed(tmp_path):
    """The child closes every descriptor but its pipe; a handler of the parent's on a file (or on a worker's
    console pipe) then printed "--- Logging error --- OSError: [Errno 9]" to stderr for each line the child
    logged (Pillow's debug lines at OCRQ_LOG_LEVEL=DEBUG)."""
    script = (
        "import logging, sys\n"
        "from common.documents.isolation import run_isolated\n"
        f"logging.basicConfig(filename={str(tmp_path / 'parent.log')!r}, level=logging.DEBUG)\n"
        "def answer():\n"
        "    logging.getLogger('PIL.PngImagePlugin').debug('STREAM b\\'IHDR\\' 16 13')\n"
        "    return 'answered'\n"
        "print(run_isolated(answer, timeout_s=10, max_pixels=1, what='logging'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "answered", done.stderr
    assert "Logging error" not in done.stderr, done.stderr


def test_hung_inspection_times_out(monkeypatch, normal_pdf):
    monkeypatch.setattr(inspection, "_page_sizes", _hang)
    before = _children()
    with pytest.raises(DocumentRejected) as refused:
        inspect(normal_pdf, limits=Limits(render_timeout_s=0.5))
    assert refused.value.code == "render_timeout"
    assert _no_children_left(before)


def test_crashing_render_is_reported(monkeypatch, normal_pdf):
    monkeypatch.setattr(rendering, "_render", _crash)
    before = _children()
    with pytest.raises(DocumentRejected) as refused:
        render_page(normal_pdf, 0, limits=LIMITS)
    assert refused.value.code == "render_crashed"
    assert "SIGSEGV" in refused.value.message
    assert _no_children_left(before)
    monkeypatch.undo()
    assert_still_renders(normal_pdf)


def test_render_memory_is_capped(monkeypatch, normal_pdf):
    monkeypatch.setattr(rendering, "_render", _eat_memory)
    with pytest.raises(DocumentRejected) as refused:
        render_page(normal_pdf, 0, limits=Limits(max_page_pixels=1_000_000))
    assert refused.value.code == "render_crashed"
    assert "memory" in refused.value.message


# --- sniffing: content decides, never the name --------------------------------------------


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"%PDF-1.7\n", "pdf"),
        (b"\x00" * 300 + b"%PDF-1.4\n", "pdf"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "jpeg"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "webp"),
        (b"BM" + bytes(12) + (40).to_bytes(4, "little"), "bmp"),
        (b"GIF89a\x01\x00", "gif"),
        (b"GIF87a\x01\x00", "gif"),
        (b"II*\x00\x08\x00", "tiff"),
        (b"MM\x00*\x00\x00", "tiff"),
    ],
)
def test_sniff_known_kinds(head, kind):
    assert sniff(head) == kind


@pytest.mark.parametrize(
    "head",
    [
        b"hello world",
        b"BMW is a car brand, not a bitmap....",
        b"RIFF\x10\x00\x00\x00WAVEfmt ",
        b"\x00" * 2000 + b"%PDF-",
    ],
)
def test_sniff_refuses_other_content(head):
    with pytest.raises(DocumentRejected) as refused:
        sniff(head)
    assert refused.value.code == "unsupported_type"


def test_sniff_empty():
    with pytest.raises(DocumentRejected) as refused:
        sniff(b"")
    assert refused.value.code == "empty_file"


def test_png_named_pdf_is_a_png(corpus):
    path = hostile.png_named_pdf(corpus / "picture.pdf")
    assert inspect(path, limits=LIMITS) == DocumentInfo(kind="png", page_count=1, mime="image/png")
    assert render_page(path, 0, limits=LIMITS).source_kind == "png"


def test_pdf_named_png_is_a_pdf(corpus):
    path = hostile.text_pdf(corpus / "document.png", ["a PDF wearing a .png name"])
    assert inspect(path, limits=LIMITS).kind == "pdf"


# --- PDF rendering: size policy, order, content --------------------------------------------


@pytest.mark.parametrize(
    ("size_pt", "expected"),
    [
        (hostile.LETTER_PT, (1190, 1540)),
        (hostile.A4_PT, (1089, 1540)),
        ((842, 595), (1540, 1089)),  # A4 landscape
        ((2384, 3370), (1090, 1540)),  # A0: scaled down to the longest side
        ((252, 144), (1540, 880)),  # business card: enlarged to the longest side (440 DPI)
        ((36, 36), (300, 300)),  # half an inch: held at 600 DPI rather than blown up
        ((7000, 80), (1540, 18)),  # long strip within the aspect limit
    ],
)
def test_pdf_page_sizes(size_pt, expected, corpus):
    path = hostile.sized_page_pdf(corpus / f"size-{size_pt[0]}x{size_pt[1]}.pdf", *size_pt)
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == expected
    assert page.image.size == expected and page.image.mode == "RGB"
    assert page.source_kind == "pdf"


def test_pdf_longest_side_follows_limits(corpus):
    path = hostile.sized_page_pdf(corpus / "letter-small.pdf", *hostile.LETTER_PT)
    page = render_page(path, 0, limits=Limits(longest_side=770))
    assert (page.width, page.height) == (595, 770)


def test_rotated_pdf_page(corpus):
    path = hostile.sized_page_pdf(corpus / "rotated.pdf", *hostile.LETTER_PT, rotate=90)
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == (1540, 1190)
    # The square at the unrotated top left lands at the top right after a quarter turn clockwise.
    assert pixels(page.image)[20, 1520].tolist() == [0, 0, 0]
    assert pixels(page.image)[1170, 20].tolist() == [255, 255, 255]  # where a counter-clockwise turn puts it


def test_multipage_pdf_pages_in_order(corpus):
    sources = [
        hostile.text_page("Page one: the quick brown fox jumps over the lazy dog."),
        hostile.text_page("第二页：敏捷的棕色狐狸跳过了懒狗。日本語のテキストも。", font=hostile.FONT_CJK),
        hostile.text_page("Page trois : où est la bibliothèque ? Ça va très bien."),
    ]
    path = hostile.pdf_of(sources, corpus / "three-pages.pdf")
    assert inspect(path, limits=LIMITS) == DocumentInfo(kind="pdf", page_count=3, mime="application/pdf")
    for index, source in enumerate(sources):
        page = render_page(path, index, limits=LIMITS)
        assert (page.width, page.height) == (1190, 1540)
        distances = [similarity(page.image, other) for other in sources]
        assert min(range(3), key=distances.__getitem__) == index
        assert distances[index] < 2.0


def test_text_pdf_renders_text(corpus):
    path = hostile.text_pdf(corpus / "vector.pdf", ["Vector text " * 200])
    page = render_page(path, 0, limits=LIMITS)
    dark = (pixels(page.image).mean(axis=2) < 128).mean()
    assert 0.005 < dark < 0.3


def test_sample_scan_pdf_renders(samples):
    path = samples / "c03-29.pdf"
    info = inspect(path, limits=LIMITS)
    assert info == DocumentInfo(kind="pdf", page_count=1, mime="application/pdf")
    page = render_page(path, 0, limits=LIMITS)
    assert max(page.width, page.height) == 1540
    assert page.height == 1540 and 1150 < page.width < 1250
    values = pixels(page.image)
    assert values.std() > 20 and values.mean() > 100  # a page of print, not blank or black


# --- image normalisation -------------------------------------------------------------------


def test_palette_transparency_flattened_onto_white(corpus):
    page = render_page(hostile.palette_transparent_png(corpus / "palette.png"), 0, limits=LIMITS)
    values = pixels(page.image)
    assert values[700, 500].tolist() == [255, 255, 255]  # transparent index, black in the palette
    assert values[50, 50].tolist() == [200, 0, 0]


def test_rgba_flattened_onto_white(corpus):
    page = render_page(hostile.rgba_png(corpus / "rgba.png"), 0, limits=LIMITS)
    values = pixels(page.image)
    assert page.image.mode == "RGB"
    assert values[700, 500].tolist() == [255, 255, 255]
    assert values[50, 50].tolist() == [200, 0, 0]


def test_la_flattened_onto_white(corpus):
    page = render_page(hostile.la_png(corpus / "la.png"), 0, limits=LIMITS)
    values = pixels(page.image)
    assert values[700, 500].tolist() == [255, 255, 255]
    assert values[50, 50].tolist() == [60, 60, 60]


def test_cmyk_converted(corpus):
    page = render_page(hostile.cmyk_jpeg(corpus / "cmyk.jpg"), 0, limits=LIMITS)
    values = pixels(page.image)
    assert page.image.mode == "RGB"
    assert (values[700, 500] >= 250).all()  # paper stays white
    assert (values[50, 50] <= 10).all()  # black ink stays black


def test_sixteen_bit_scaled_not_clipped(corpus):
    page = render_page(hostile.gray16_png(corpus / "gray16.png"), 0, limits=LIMITS)
    values = pixels(page.image)
    assert values[700, 500].tolist() == [128, 128, 128]
    assert values[50, 50].tolist() == [0, 0, 0]


def test_exif_orientation_applied(corpus):
    page = render_page(hostile.exif_rotated_jpeg(corpus / "rotated.jpg"), 0, limits=LIMITS)
    assert (page.width, page.height) == (400, 600)
    values = pixels(page.image)
    assert (values[20, 380] < 30).all()  # the stored top-left square, turned to the top right
    assert (values[20, 20] > 225).all()


def test_multipage_tiff_pages_in_order(corpus):
    sizes = [(800, 600), (600, 800), (500, 500)]
    path = hostile.multipage_tiff(corpus / "pages.tiff", sizes=sizes)
    assert inspect(path, limits=LIMITS) == DocumentInfo(kind="tiff", page_count=3, mime="image/tiff")
    assert [render_page(path, i, limits=LIMITS).image.size for i in range(3)] == sizes


def test_gif_first_frame_only(corpus):
    path = hostile.animated_gif(corpus / "anim.gif")
    assert inspect(path, limits=LIMITS).page_count == 1
    values = pixels(render_page(path, 0, limits=LIMITS).image)
    assert values[250, 350].tolist() == [255, 255, 255]  # white in frame 1, black in frame 2
    assert values[10, 10].tolist() == [0, 0, 0]


@pytest.mark.parametrize(("maker", "kind"), [("bmp_image", "bmp"), ("webp_image", "webp")])
def test_other_image_kinds(maker, kind, corpus):
    path = getattr(hostile, maker)(corpus / f"page.{kind}")
    assert inspect(path, limits=LIMITS).kind == kind
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == (600, 800) and page.source_kind == kind
    assert similarity(page.image, hostile.text_page(f"{'BMP' if kind == 'bmp' else 'WebP'} page", size=(600, 800))) < 1


def test_large_image_capped_keeping_aspect(corpus):
    path = hostile.big_jpeg(corpus / "big.jpg", size=(4000, 3000))
    page = render_page(path, 0, limits=LIMITS)
    assert (page.width, page.height) == (1540, 1155)
    reference = hostile.text_page("Large photo " * 200, size=(4000, 3000), font_size=60)
    assert similarity(page.image, reference) < 6


def test_small_image_not_enlarged(corpus):
    path = hostile.bmp_image(corpus / "small.bmp")
    page = render_page(path, 0, limits=Limits(longest_side=2000))
    assert (page.width, page.height) == (600, 800)


# --- page ranges ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "count", "expected"),
    [
        (None, 3, [0, 1, 2]),
        ("", 2, [0, 1]),
        ("  ", 2, [0, 1]),
        ("1-3,7", 10, [0, 1, 2, 6]),
        ("7,1-3", 10, [0, 1, 2, 6]),
        ("2,2,1-2", 5, [0, 1]),
        ("5-", 7, [4, 5, 6]),
        ("-2", 7, [0, 1]),
        (" 3 - 4 , 1 ", 5, [0, 2, 3]),
        ("4", 4, [3]),
    ],
)
def test_page_ranges(spec, count, expected):
    assert parse_page_ranges(spec, count) == expected


@pytest.mark.parametrize(
    ("spec", "count", "fragment"),
    [
        ("0", 5, "numbered from 1"),
        ("6", 5, "beyond the end"),
        ("2-9", 5, "beyond the end"),
        ("6-", 5, "beyond the end"),
        ("3-1", 5, "backwards"),
        ("a", 5, "not a page or a range"),
        ("1,,2", 5, "not a page or a range"),
        ("1-2-3", 5, "not a page or a range"),
        ("-", 5, "not a page or a range"),
        ("1.5", 5, "not a page or a range"),
        ("٣", 5, "not a page or a range"),
        ("9" * 5000, 5, "beyond the end"),
        (None, 0, "no pages"),
    ],
)
def test_page_range_errors(spec, count, fragment):
    with pytest.raises(PageRangeError) as error:
        parse_page_ranges(spec, count)
    assert fragment in str(error.value)
    assert isinstance(error.value, ValueError)


def test_a_clamped_range_ends_at_the_last_page():
    assert parse_page_ranges("2-9", 3, clamp=True) == [1, 2]
    assert parse_page_ranges("1,3-8", 4, clamp=True) == [0, 2, 3]
    with pytest.raises(PageRangeError, match="page 4 is beyond the end"):
        parse_page_ranges("4-9", 3, clamp=True)
    with pytest.raises(PageRangeError, match="page 9 is beyond the end"):
        parse_page_ranges("2-9", 3)


# --- limits --------------------------------------------------------------------------------


def test_limits_from_settings():
    settings = Settings(max_pages_per_job=7, max_page_pixels=1234, render_longest_side=999, render_timeout_s=2.5)
    assert Limits.from_settings(settings) == Limits(
        max_pages=7, max_page_pixels=1234, longest_side=999, render_timeout_s=2.5
    )


def test_limits_defaults_match_settings(monkeypatch):
    for name in ("MAX_PAGES_PER_JOB", "MAX_PAGE_PIXELS", "RENDER_LONGEST_SIDE", "RENDER_TIMEOUT_S"):
        monkeypatch.delenv(f"OCRQ_{name}", raising=False)
    assert Limits.from_settings(Settings(_env_file=None)) == Limits()


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        Limits(render_timeout_s=0)


# A worker thread in the middle of importing one of Pillow's plugins (as Image.open and Image.save import them
# lazily) while another thread forks a render: the child inherits that import's lock, held by a thread it does not
# have. Here the import is held open on purpose; in a threads worker it happened by chance (a render timed out).
FORK_DURING_IMPORT = """
import importlib.abc, importlib.machinery, sys, threading
from pathlib import Path
from common.documents import Limits, render_page

started, release = threading.Event(), threading.Event()

class HeldOpen(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "PIL.PngImagePlugin":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            started.set()
            release.wait(30)
            run(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, HeldOpen())
threading.Thread(target=lambda: __import__("PIL.PngImagePlugin"), daemon=True).start()
started.wait(2)  # never set where the plugin was imported before: the import finds it and is done
try:
    page = render_page(Path(sys.argv[1]), 0, limits=Limits(render_timeout_s=8))
    print("rendered", page.width, page.height)
finally:
    release.set()
"""


def test_a_render_forked_while_another_thread_imports_a_pillow_plugin_completes(tmp_path):
    path = tmp_path / "page.png"
    Image.new("RGB", (300, 200), "white").save(path)
    done = subprocess.run([sys.executable, "-c", FORK_DURING_IMPORT, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.strip() == "rendered 300 200", done.stdout + done.stderr[-2000:]
