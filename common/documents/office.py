"""Office files and web pages, turned into PDF by LibreOffice headless and then read as born-digital PDFs.

What a tenant sends is checked before LibreOffice sees it: a package's parts are counted and their real sizes read
(a zip bomb stops at the limit), macro-enabled files and XML entity declarations are refused. The conversion runs
in its own process group with a deadline and an address-space cap, inside a network namespace of its own, so a
linked picture or stylesheet (a metadata address, a loopback port) is never fetched; without one it is refused.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import zipfile
from pathlib import Path

from .errors import DocumentRejected

OFFICE_KINDS = frozenset({"docx", "xlsx", "pptx", "odt", "ods", "odp", "epub", "rtf", "html"})
MIME_TYPES = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "epub": "application/epub+zip",
    "rtf": "application/rtf",
    "html": "text/html",
}
_OOXML = {
    "wordprocessingml.document.main+xml": "docx",
    "spreadsheetml.sheet.main+xml": "xlsx",
    "presentationml.presentation.main+xml": "pptx",
}
_ODF = {MIME_TYPES[k]: k for k in ("odt", "ods", "odp", "epub")}
PACKAGES = "libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui"

# Parts and unpacked bytes a package may hold: far above any real office file, far below what exhausts a worker.
MAX_PARTS = 10_000
MAX_UNPACKED_BYTES = 512 << 20
# Address space of the converter: soffice.bin maps about 1 GiB on start.
CONVERTER_MEMORY_BYTES = 4 << 30


def reads_as_pdf(kind: str | None) -> bool:
    """Whether a job's document is read through a PDF (its own, or its conversion)."""
    return kind == "pdf" or kind in OFFICE_KINDS


def head_kind(head: bytes) -> str | None:
    """RTF or HTML from a file's first bytes, or None."""
    if head.startswith(b"{\\rtf"):
        return "rtf"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")) and b"\x00" not in head:
        return "html"
    return None


def package_kind(path: Path) -> str:
    """The office kind of a zip package at path, after its checks; DocumentRejected if it is none or is refused."""
    try:
        with zipfile.ZipFile(path) as package:
            parts = package.infolist()
            if len(parts) > MAX_PARTS:
                raise DocumentRejected("decompression_bomb", f"The package holds more than {MAX_PARTS} parts.")
            kind = _kind_of(package, {p.filename for p in parts})
            _check_parts(package, parts)
            return kind
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError):
        raise DocumentRejected("corrupt_file", "The file is a damaged or unreadable zip package.") from None


def _kind_of(package: zipfile.ZipFile, names: set[str]) -> str:
    if "mimetype" in names:
        kind = _ODF.get(_read(package, "mimetype", 200).decode("ascii", "replace").strip())
        if kind:
            return kind
    if "[Content_Types].xml" in names:
        types = _read(package, "[Content_Types].xml", 1 << 20)
        if b"macroEnabled" in types or any(n.lower().endswith("vbaproject.bin") for n in names):
            raise DocumentRejected("macros_refused", "The file carries macros, which ocrq does not open; save it "
                                                     "without macros (as .docx, .xlsx or .pptx) and send it again.")
        for suffix, kind in _OOXML.items():
            if suffix.encode() in types:
                return kind
    raise DocumentRejected("unsupported_type", "The file is a zip package that is not an office document ocrq "
                                               "reads (DOCX, XLSX, PPTX, ODT, ODS, ODP or EPUB).")


def _check_parts(package: zipfile.ZipFile, parts: list[zipfile.ZipInfo]) -> None:
    """Read every part for real, within MAX_UNPACKED_BYTES in all, refusing XML entity declarations."""
    left = MAX_UNPACKED_BYTES
    for part in parts:
        if part.is_dir():
            continue
        tail = b""
        with package.open(part) as stream:
            while chunk := stream.read(1 << 20):
                left -= len(chunk)
                if left < 0:
                    raise DocumentRejected("decompression_bomb",
                                           f"The package unpacks to more than {MAX_UNPACKED_BYTES >> 20} MiB.")
                if b"<!ENTITY" in tail + chunk:
                    raise DocumentRejected("xml_entities", "The file declares XML entities, which office "
                                                           "documents never need; it is refused.")
                tail = chunk[-8:]


def _read(package: zipfile.ZipFile, name: str, limit: int) -> bytes:
    with package.open(name) as stream:
        return stream.read(limit)


def check_converter() -> None:
    """DocumentRejected unless LibreOffice and a private network namespace are there to convert with."""
    if not shutil.which("soffice"):
        raise DocumentRejected("office_unavailable", f"Office files and web pages need LibreOffice on the "
                                                     f"workers; install it (apt-get install {PACKAGES}).")
    if not _network_namespace():
        raise DocumentRejected("office_unavailable", "Office files and web pages are converted without network "
                                                     "access, and this host cannot make a network namespace "
                                                     "(unshare -rn); ask its operator to allow user namespaces.")


@functools.cache
def _network_namespace() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# LibreOffice's PDF export filter for each kind: the one its import opens the document in.
_EXPORT = {"xlsx": "calc", "ods": "calc", "pptx": "impress", "odp": "impress"}


def convert_to_pdf(path: Path, kind: str, workdir: Path, *, timeout_s: float, max_pages: int) -> Path:
    """The document at path as a PDF in workdir, converted by LibreOffice in a network namespace of its own; at
    most max_pages + 1 pages are written, so a document over the limit is known as one without writing it all (a
    10,000-page spreadsheet took 23 s whole here, 6 s to its 2,001st page)."""
    check_converter()
    source = workdir / f"document.{kind}"  # LibreOffice chooses its import filter by the name's suffix
    shutil.copyfile(path, source)
    out = workdir / "out"
    export = f"pdf:{_EXPORT.get(kind, 'writer')}_pdf_Export:" \
             f'{{"PageRange":{{"type":"string","value":"1-{max_pages + 1}"}}}}'
    # Web pages go through Writer, not Writer/Web: its import dropped an <h1> here (LibreOffice 7.4).
    target = (["--infilter=HTML (StarWriter)"] if kind == "html" else []) + ["--convert-to", export]
    command = ["unshare", "-rn", shutil.which("soffice"), "--headless", "--norestore", "--nolockcheck",
               "--nodefault", f"-env:UserInstallation={(workdir / 'profile').as_uri()}",
               *target, "--outdir", str(out), str(source)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "LANG": "C.UTF-8"}
    process = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=_cap_memory)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DocumentRejected("conversion_failed",
                               f"Converting the document to PDF took longer than {timeout_s:g} s.") from None
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    pdf = out / "document.pdf"
    if not pdf.is_file() or pdf.stat().st_size == 0:
        raise DocumentRejected("conversion_failed", "LibreOffice could not convert the document to PDF.")
    return pdf


def too_many_pages(max_pages: int) -> DocumentRejected:
    """The refusal of a converted document that made more than max_pages pages (its PDF stops one page after)."""
    return DocumentRejected("too_many_pages", f"The document makes more than {max_pages} pages once converted to "
                                              f"PDF; at most {max_pages} are accepted per job.")


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CONVERTER_MEMORY_BYTES, CONVERTER_MEMORY_BYTES))
