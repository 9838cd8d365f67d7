"""Generators of test documents: pages of known text, and a hostile corpus written at test time."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

FONT_LATIN = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FONT_CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
LETTER_PT = (612, 792)
A4_PT = (595, 842)


# --- pages of known text ---------------------------------------------------------------------


def text_page(
    text: str, *, font: str = FONT_LATIN, size: tuple[int, int] = (1190, 1540), font_size: int = 36
) -> Image.Image:
    """A white RGB page with text drawn in black, wrapped at the page's right margin."""
    page = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(page)
    face = ImageFont.truetype(font, font_size)
    margin = size[0] // 12
    y = margin
    for line in _wrap(text, face, draw, size[0] - 2 * margin):
        draw.text((margin, y), line, font=face, fill="black")
        y += int(font_size * 1.5)
    return page


def lettered(words: str, *, font_size: int = 64, background: str = "#e1ebfa") -> Image.Image:
    """A picture holding a few big words, as a logo, a banner or a chart's title is: one line on a tint."""
    face = ImageFont.truetype(FONT_LATIN.replace("DejaVuSans", "DejaVuSans-Bold"), font_size)
    picture = Image.new("RGB", (int(face.getlength(words)) + font_size, font_size * 5 // 2), background)
    ImageDraw.Draw(picture).text((font_size // 2, font_size * 5 // 8), words, font=face, fill="black")
    return picture


def _wrap(text: str, face: ImageFont.FreeTypeFont, draw: ImageDraw.ImageDraw, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        # Spaces split Latin words; CJK text has none, so it wraps per character.
        tokens = paragraph.split(" ") if " " in paragraph else list(paragraph)
        sep = " " if " " in paragraph else ""
        for token in tokens:
            candidate = f"{line}{sep}{token}" if line else token
            if draw.textlength(candidate, font=face) <= width or not line:
                line = candidate
            else:
                lines.append(line)
                line = token
        lines.append(line)
    return lines


def pdf_of(images: Sequence[Image.Image], path: Path, *, dpi: float = 140.0) -> Path:
    """A PDF with one image page per image; 1190x1540 px at 140 DPI is a US Letter page."""
    first, *rest = [im.convert("RGB") for im in images]
    first.save(path, "PDF", save_all=True, append_images=rest, resolution=dpi)
    return path


def text_pdf(path: Path, pages: Sequence[str], *, page_size: tuple[float, float] = LETTER_PT) -> Path:
    """A PDF of vector text in Helvetica (ASCII only), one string per page, wrapped at 90 columns."""
    width, height = page_size
    specs = []
    for text in pages:
        lines = [chunk for para in text.split("\n") for chunk in _columns(para, 90)]
        ops = [b"BT /F1 11 Tf 14 TL", f"54 {height - 60:.0f} Td".encode()]
        ops += [b"(" + _pdf_escape(line) + b") '" for line in lines]
        ops.append(b"ET")
        specs.append(PdfPage((width, height), b"\n".join(ops), fonts=True))
    return write_pdf(path, specs)


def _columns(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def _pdf_escape(text: str) -> bytes:
    raw = text.encode("latin-1", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


# --- a minimal hand-written PDF writer -------------------------------------------------------


class PdfPage:
    """One page for write_pdf: its MediaBox size in points, content stream and resources."""

    def __init__(
        self,
        size: tuple[float, float],
        content: bytes = b"",
        *,
        fonts: bool = False,
        image: tuple[dict[str, object], bytes] | None = None,
        rotate: int = 0,
    ) -> None:
        self.size, self.content, self.fonts, self.image, self.rotate = size, content, fonts, image, rotate


def write_pdf(
    path: Path,
    pages: Sequence[PdfPage],
    *,
    encrypt: bytes | None = None,
    file_id: bytes | None = None,
    stream_filter=None,
) -> Path:
    """Write a PDF built object by object; stream_filter(num, data) may transform stream data."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    def stream(entries: bytes, data: bytes) -> int:
        num = len(objects) + 1
        if stream_filter:
            data = stream_filter(num, data)
        return add(b"<< %s /Length %d >>\nstream\n" % (entries, len(data)) + data + b"\nendstream")

    catalog = add(b"")
    tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    kids = []
    for page in pages:
        resources = b"/Font << /F1 %d 0 R >>" % font if page.fonts else b""
        if page.image:
            entries, data = page.image
            image = stream(_pdf_entries(entries), data)
            resources += b" /XObject << /Im1 %d 0 R >>" % image
        contents = stream(b"", page.content)
        w, h = page.size
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %s %s] /Rotate %d"
                b" /Resources << %s >> /Contents %d 0 R >>"
                % (tree, _num(w), _num(h), page.rotate, resources, contents)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    objects[tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    trailer = b"/Size %d /Root %d 0 R" % (len(objects) + 1 + (encrypt is not None), catalog)
    if encrypt is not None:
        trailer += b" /Encrypt %d 0 R" % (len(objects) + 1)
        objects.append(encrypt)
    if file_id is not None:
        trailer += b" /ID [<%s> <%s>]" % (file_id.hex().encode(), file_id.hex().encode())

    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< " + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    Path(path).write_bytes(bytes(out))
    return Path(path)


def _num(value: float) -> bytes:
    return (b"%d" % value) if float(value).is_integer() else (b"%.3f" % value)


def _pdf_entries(entries: dict[str, object]) -> bytes:
    return b" ".join(f"/{k} {v}".encode() for k, v in entries.items())


def _image_content(size: tuple[float, float]) -> bytes:
    return b"q %s 0 0 %s 0 0 cm /Im1 Do Q" % (_num(size[0]), _num(size[1]))


# --- hostile PDFs ----------------------------------------------------------------------------


def mono_image_pdf(path: Path, *, pixels: int = 35_000, dpi: int = 300, black: bool = False) -> Path:
    """A page holding one pixels x pixels 1-bit CCITT G4 image, all white or all black (via /Decode)."""
    # In G4 an all-white row that repeats the row above is the single bit "1" (vertical mode V0).
    bits = "1" * pixels + "000000000001" * 2  # rows, then the end-of-facsimile-block code
    bits += "0" * (-len(bits) % 8)
    data = int(bits, 2).to_bytes(len(bits) // 8, "big")
    side = pixels * 72 / dpi
    entries = {
        "Type": "/XObject",
        "Subtype": "/Image",
        "Width": pixels,
        "Height": pixels,
        "ColorSpace": "/DeviceGray",
        "BitsPerComponent": 1,
        "Filter": "/CCITTFaxDecode",
        "DecodeParms": f"<< /K -1 /Columns {pixels} /Rows {pixels} >>",
    }
    if black:
        entries["Decode"] = "[1 0]"
    return write_pdf(path, [PdfPage((side, side), _image_content((side, side)), image=(entries, data))])


def huge_mono_pdf(path: Path) -> Path:
    """The 35,000 x 35,000 monochrome page (CCITT G4 standing in for JBIG2), 58 in square at 600 DPI."""
    return mono_image_pdf(path, pixels=35_000, dpi=600)


def sized_page_pdf(path: Path, width_pt: float, height_pt: float, *, rotate: int = 0) -> Path:
    """One page of the given MediaBox size with a line of text and a black square at its top left."""
    square = min(width_pt, height_pt) / 4
    content = b"0 g 0 %s %s %s re f BT /F1 10 Tf 10 10 Td (page of %s x %s pt) Tj ET" % (
        _num(height_pt - square),
        _num(square),
        _num(square),
        _num(width_pt),
        _num(height_pt),
    )
    return write_pdf(path, [PdfPage((width_pt, height_pt), content, fonts=True, rotate=rotate)])


def wide_page_pdf(path: Path) -> Path:
    """A page 20,000 x 800 pt: 7 metres wide."""
    return sized_page_pdf(path, 20_000, 800)


def thin_page_pdf(path: Path) -> Path:
    """A page 7,000 x 50 pt: within size, but 140 times longer than it is high."""
    return sized_page_pdf(path, 7_000, 50)


def invalid_pdf(path: Path) -> Path:
    """A PDF header followed by the EOF marker, nothing between."""
    path.write_bytes(b"%PDF-1.7\n%%EOF")
    return path


def zero_page_pdf(path: Path) -> Path:
    """A well-formed PDF whose page tree has no pages."""
    return write_pdf(path, [])


_PASSWORD_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


def encrypted_pdf(path: Path) -> Path:
    """A PDF encrypted (RC4, revision 2) with a user password nobody was told."""
    return _rc4_pdf(path, user_password=os.urandom(8).hex().encode())


def owner_encrypted_pdf(path: Path) -> Path:
    """A PDF encrypted with an owner password only: any reader opens it without a password."""
    return _rc4_pdf(path, user_password=b"")


def _rc4_pdf(path: Path, *, user_password: bytes) -> Path:
    permissions = -3904
    file_id = os.urandom(16)
    owner_key = hashlib.md5(_pad(b"owner secret")).digest()[:5]
    owner_entry = _rc4(owner_key, _pad(user_password))
    key = hashlib.md5(_pad(user_password) + owner_entry + struct.pack("<i", permissions) + file_id).digest()[:5]
    user_entry = _rc4(key, _PASSWORD_PAD)
    encrypt = b"<< /Filter /Standard /V 1 /R 2 /Length 40 /O <%s> /U <%s> /P %d >>" % (
        owner_entry.hex().encode(),
        user_entry.hex().encode(),
        permissions,
    )

    def encrypt_stream(num: int, data: bytes) -> bytes:
        object_key = hashlib.md5(key + num.to_bytes(3, "little") + b"\x00\x00").digest()[:10]
        return _rc4(object_key, data)

    content = b"0 g 72 600 200 100 re f BT /F1 24 Tf 72 500 Td (Encrypted text) Tj ET"
    return write_pdf(
        path,
        [PdfPage(LETTER_PT, content, fonts=True)],
        encrypt=encrypt,
        file_id=file_id,
        stream_filter=encrypt_stream,
    )


def _pad(password: bytes) -> bytes:
    return (password + _PASSWORD_PAD)[:32]


def _rc4(key: bytes, data: bytes) -> bytes:
    state = list(range(256))
    j = 0
    for i in range(256):
        j = (j + state[i] + key[i % len(key)]) % 256
        state[i], state[j] = state[j], state[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + state[i]) % 256
        state[i], state[j] = state[j], state[i]
        out.append(byte ^ state[(state[i] + state[j]) % 256])
    return bytes(out)


# --- hostile and awkward images --------------------------------------------------------------


def png_bomb(path: Path, *, side: int = 100_000) -> Path:
    """A 1-bit side x side PNG of zeros: about 1 MB on disk, side**2 pixels once decoded."""
    row = 1 + (side + 7) // 8  # filter byte, then packed bits
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib_zeros(row * side)) + _chunk(b"IEND", b"")
    )
    return path


def zlib_zeros(length: int) -> bytes:
    """A valid zlib stream of length zero bytes, built without compressing them all."""
    # After a full flush a deflate block refers to nothing before it, so one compressed MiB of
    # zeros can be repeated; the Adler-32 of n zeros is (n mod 65521) << 16 | 1.
    chunk = 1 << 20
    whole, rest = divmod(length, chunk)
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    repeated = block.compress(bytes(chunk)) + block.flush(zlib.Z_FULL_FLUSH)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)
    last = tail.compress(bytes(rest)) + tail.flush()
    adler = ((length % 65521) << 16) | 1
    return b"\x78\xda" + repeated * whole + last + struct.pack(">I", adler)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def truncated_jpeg(path: Path) -> Path:
    """A text-page JPEG cut off at 60 % of its length."""
    data = _encoded(text_page("Truncated JPEG " * 40, size=(800, 1000)), "JPEG", quality=90)
    path.write_bytes(data[: len(data) * 6 // 10])
    return path


def truncated_png(path: Path) -> Path:
    """A text-page PNG cut off at 60 % of its length."""
    data = _encoded(text_page("Truncated PNG " * 40, size=(800, 1000)), "PNG")
    path.write_bytes(data[: len(data) * 6 // 10])
    return path


def _marked(mode: str, size: tuple[int, int], background, ink) -> Image.Image:
    """An image of one colour with a filled square of another in its top-left quarter."""
    image = Image.new(mode, size, background)
    ImageDraw.Draw(image).rectangle((0, 0, size[0] // 4, size[1] // 4), fill=ink)
    return image


def cmyk_jpeg(path: Path) -> Path:
    """A CMYK JPEG: paper white with a pure black square at the top left."""
    _marked("CMYK", (600, 800), (0, 0, 0, 0), (0, 0, 0, 255)).save(path, "JPEG", quality=95)
    return path


def palette_transparent_png(path: Path) -> Path:
    """A palette PNG whose transparent index is black: a naive conversion turns it black."""
    image = Image.new("P", (600, 800), 0)
    image.putpalette([0, 0, 0, 200, 0, 0] + [0] * 762)
    ImageDraw.Draw(image).rectangle((0, 0, 150, 200), fill=1)
    image.save(path, "PNG", transparency=0)
    return path


def rgba_png(path: Path) -> Path:
    """An RGBA PNG: transparent black background, opaque red square at the top left."""
    _marked("RGBA", (600, 800), (0, 0, 0, 0), (200, 0, 0, 255)).save(path, "PNG")
    return path


def la_png(path: Path) -> Path:
    """An LA PNG: transparent black background, opaque dark-grey square at the top left."""
    _marked("LA", (600, 800), (0, 0), (60, 255)).save(path, "PNG")
    return path


def gray16_png(path: Path) -> Path:
    """A 16-bit greyscale PNG: mid-grey 32896 (128 in 8 bits) with a black square at the top left."""
    _marked("I;16", (600, 800), 32896, 0).save(path, "PNG")
    return path


def exif_rotated_jpeg(path: Path) -> Path:
    """A 600x400 JPEG, black square at its stored top left, with EXIF orientation 6 (turn 90° cw)."""
    exif = Image.Exif()
    exif[0x0112] = 6
    _marked("RGB", (600, 400), "white", "black").save(path, "JPEG", exif=exif, quality=95)
    return path


def multipage_tiff(path: Path, *, sizes: Sequence[tuple[int, int]] = ((800, 600), (600, 800), (500, 500))) -> Path:
    """A multi-page TIFF, one page per size, each page a different size so order can be checked."""
    first, *rest = [_marked("RGB", size, "white", "black") for size in sizes]
    first.save(path, "TIFF", save_all=True, append_images=rest, compression="tiff_deflate")
    return path


def animated_gif(path: Path) -> Path:
    """A two-frame GIF: a white first frame with a black square, then an all-black frame."""
    first = _marked("RGB", (400, 300), "white", "black")
    second = Image.new("RGB", (400, 300), "black")
    first.save(path, "GIF", save_all=True, append_images=[second], duration=100, loop=0)
    return path


def bmp_image(path: Path) -> Path:
    """A BMP page of text."""
    text_page("BMP page", size=(600, 800)).save(path, "BMP")
    return path


def webp_image(path: Path) -> Path:
    """A lossless WebP page of text."""
    text_page("WebP page", size=(600, 800)).save(path, "WEBP", lossless=True)
    return path


def big_jpeg(path: Path, *, size: tuple[int, int] = (4000, 3000)) -> Path:
    """A large photo-sized JPEG of text, to be shrunk to the longest side."""
    text_page("Large photo " * 200, size=size, font_size=60).save(path, "JPEG", quality=90)
    return path


def text_named_png(path: Path) -> Path:
    """A text file wearing a .png name."""
    path.write_text("This is plain text, not an image.\n" * 10)
    return path


def png_named_pdf(path: Path) -> Path:
    """A PNG page wearing a .pdf name."""
    text_page("A PNG named .pdf", size=(600, 800)).save(path, "PNG")
    return path


def empty_file(path: Path) -> Path:
    """A file of zero bytes."""
    path.write_bytes(b"")
    return path
