"""The layout formats checked by what others wrote: the official ALTO 4.4 and PAGE 2019 XSDs, and hocr-tools."""

from __future__ import annotations

import contextlib
import io
import zipfile
from functools import cache
from pathlib import Path

from lxml import etree

SCHEMAS = Path(__file__).parent / "schemas"


class _LocalSchemas(etree.Resolver):
    """The schemas' imports from the web, answered from the copies beside them."""

    def resolve(self, url, pubid, context):
        if url and url.endswith("xlink.xsd"):
            return self.resolve_filename(str(SCHEMAS / "xlink.xsd"), context)
        return None


@cache
def _schema(name: str) -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(_LocalSchemas())
    return etree.XMLSchema(etree.parse(str(SCHEMAS / name), parser))


def _validate(name: str, document: bytes) -> etree._Element:
    root = etree.fromstring(document)
    schema = _schema(name)
    assert schema.validate(root), "\n".join(str(e) for e in schema.error_log)
    return root


def valid_alto(document: bytes) -> etree._Element:
    return _validate("alto-4-4.xsd", document)


def valid_page_zip(archive: bytes) -> list[etree._Element]:
    """Each page's PcGts of a format=page zip, validated, in page order."""
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        names = sorted(z.namelist())
        return [_validate("pagecontent-2019-07-15.xsd", z.read(name)) for name in names]


def hocr_check(document: bytes, *, overlap: bool = True) -> None:
    """hocr-tools' hocr-check (its library version): every check must say ok."""
    from hocr_tools_lib.tools.hocr_check import Checker

    report = io.StringIO()
    with contextlib.redirect_stderr(report):
        Checker(io.BytesIO(document), no_overlap=not overlap).check()
    lines = report.getvalue().splitlines()
    assert lines and not [line for line in lines if line.startswith("not ok")], report.getvalue()
