"""Image checks and normalisation with Pillow: one RGB page per image (per frame for TIFF)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from .errors import DocumentRejected
from .limits import Limits

# Every Pillow plugin now, in the importing thread, not later in Image.open or save: renders run in forks, and a
# fork taken while another thread of the worker imports a plugin inherits that import's lock and waits forever.
Image.init()

_PIL_FORMATS = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP", "bmp": "BMP", "gif": "GIF", "tiff": "TIFF"}
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
_DEEP_MODES = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}
_QUOTED_PATH = re.compile(r"""['"]?/[^'"\s]*['"]?""")


@contextmanager
def open_image(path: Path, kind: str) -> Iterator[Image.Image]:
    """The image opened lazily (header only), closed on exit; open failures become DocumentRejected."""
    try:
        image = Image.open(path, formats=[_PIL_FORMATS[kind]])
    except Image.DecompressionBombError as error:
        raise DocumentRejected("decompression_bomb", f"The image is too large to decode safely: {error}") from None
    except Exception as error:
        raise _corrupt(kind, error) from None
    with image:
        yield image


def _corrupt(kind: str, error: BaseException) -> DocumentRejected:
    """The decoder's reason without the local file name PIL puts in some of its messages."""
    if isinstance(error, UnidentifiedImageError):
        reason = f"it is not a readable {kind.upper()} file"
    else:
        reason = _QUOTED_PATH.sub("the file", str(error)) or error.__class__.__name__
    return DocumentRejected("corrupt_image", f"The {kind.upper()} image cannot be decoded: {reason}")


def page_count(image: Image.Image, kind: str) -> int:
    """Pages in the image: every frame of a TIFF, the first frame only of anything else."""
    if kind != "tiff":
        return 1
    try:
        return image.n_frames
    except Exception as error:
        raise _corrupt(kind, error) from None


def check_pixels(image: Image.Image, *, index: int, limits: Limits) -> None:
    """Refuse a frame whose header declares more than limits.max_page_pixels, before decoding it."""
    width, height = image.size
    if width < 1 or height < 1:
        raise DocumentRejected("corrupt_image", f"Page {index + 1} declares an empty size of {width} × {height}.")
    if width * height > limits.max_page_pixels:
        raise DocumentRejected(
            "decompression_bomb",
            f"Page {index + 1} is {width:,} × {height:,} = {width * height:,} pixels; "
            f"at most {limits.max_page_pixels:,} are accepted per page.",
        )


def check_image(path: Path, kind: str, *, limits: Limits) -> tuple[tuple[int, int], ...]:
    """Each page's rendered size, after header checks of every page and a cheap truncation check."""
    with open_image(path, kind) as image:
        count = page_count(image, kind)
        if count > limits.max_pages:
            raise DocumentRejected(
                "too_many_pages", f"The image has {count} pages; at most {limits.max_pages} are accepted per job."
            )
        sizes = []
        for index in range(count):
            _seek(image, kind, index)
            check_pixels(image, index=index, limits=limits)
            sizes.append(_fit(image.size, limits.longest_side))
    _check_complete(path, kind, limits=limits)
    return tuple(sizes)


def _check_complete(path: Path, kind: str, *, limits: Limits) -> None:
    # PNG: chunk CRCs up to IEND, with no inflating. JPEG: a decode at 1/8 scale, which still
    # reads every entropy-coded byte. Other formats are only found truncated when rendered.
    if kind not in ("png", "jpeg"):
        return
    with open_image(path, kind) as image:
        try:
            if kind == "png":
                image.verify()
            else:
                image.draft(None, (1, 1))
                image.load()
        except Exception as error:
            raise _corrupt(kind, error) from None


def _seek(image: Image.Image, kind: str, index: int) -> None:
    try:
        image.seek(index)
    except Exception as error:
        raise _corrupt(kind, error) from None


def render_image_page(path: Path, kind: str, index: int, *, limits: Limits) -> Image.Image:
    """Page index of the image at path, normalised: upright, RGB on white, longest side capped."""
    with open_image(path, kind) as image:
        count = page_count(image, kind)
        if not 0 <= index < count:
            raise DocumentRejected(
                "page_out_of_range", f"Page {index + 1} does not exist; the image has {count} pages."
            )
        _seek(image, kind, index)
        check_pixels(image, index=index, limits=limits)
        try:
            if kind == "jpeg":
                # Let libjpeg scale down by up to 8x while decoding, never below the target size.
                image.draft(None, _fit(image.size, limits.longest_side))
            image.load()
            page = _upright(image)
            page = to_rgb(page)
            return _cap(page, limits.longest_side)
        except DocumentRejected:
            raise
        except MemoryError:
            raise
        except Exception as error:
            raise _corrupt(kind, error) from None


def _upright(image: Image.Image) -> Image.Image:
    try:
        return ImageOps.exif_transpose(image)
    except Exception:
        return image  # unreadable EXIF: keep the pixels as stored rather than refuse the page


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB of any mode: transparency flattened onto white, CMYK and 16-bit converted."""
    if image.mode in _DEEP_MODES:
        image = _to_8bit(image)
    if image.mode == "CMYK":
        return _cmyk_to_rgb(image)
    if image.mode in _ALPHA_MODES or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        white.alpha_composite(rgba)
        return white.convert("RGB")
    return image.convert("RGB")


def _to_8bit(image: Image.Image) -> Image.Image:
    # Pillow's own conversion clips 16-bit values at 255; scale them instead.
    values = np.asarray(image).astype(np.float64)
    if image.mode.startswith("I;16") or values.max(initial=0) > 255:
        values = values / 257
    return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), "L")


def _cmyk_to_rgb(image: Image.Image) -> Image.Image:
    profile = image.info.get("icc_profile")
    if profile:
        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
            return ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"), outputMode="RGB")
        except Exception:
            pass  # a broken profile: fall back to the plain conversion below
    return image.convert("RGB")


def _fit(size: tuple[int, int], longest_side: int) -> tuple[int, int]:
    width, height = size
    scale = min(1.0, longest_side / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _cap(image: Image.Image, longest_side: int) -> Image.Image:
    target = _fit(image.size, longest_side)
    if target == image.size:
        return image
    return image.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
