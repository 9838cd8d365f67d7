"""Text as XML 1.0 allows it: a page's text is whatever an engine or a file gave, and a control character or a
lone surrogate in it would make the whole document ill-formed (XML 1.0 section 2.2, Char)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def legal(text: str) -> str:
    """The text without the characters XML 1.0 forbids (C0 controls but tab, newline and return; lone
    surrogates; U+FFFE and U+FFFF)."""
    return _FORBIDDEN.sub("", text)


def scrub(root: ET.Element) -> ET.Element:
    """Every text, tail and attribute value under root made legal, in place."""
    for element in root.iter():
        if element.text:
            element.text = legal(element.text)
        if element.tail:
            element.tail = legal(element.tail)
        for name, value in element.attrib.items():
            element.attrib[name] = legal(value)
    return root
