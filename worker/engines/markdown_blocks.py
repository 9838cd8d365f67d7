"""The structure of a page the model wrote as markdown: blocks with kinds, and each word's place in the text.

LightOnOCR writes headings as `#`, tables as HTML, display math as `$$ … $$` (or `\\[ … \\]`), lists with
`-`/`*`/`1.`, images as `![alt](src)` (the bbox variants follow it with `x1,y1,x2,y2` on a 0–1000 grid),
and paragraphs separated by blank lines. LightOnOCR-3 in grounding mode (lightonai/LightOnOCR's README,
"Grounding output") puts `![label](x1,y1,x2,y2)` before every layout block instead, its box on a 0–1000
grid, and the block's text runs to the next marker; `label+` continues the block before it. Each block keeps its words with their offsets in the markdown, so
the tokens the model sampled (and their log-probabilities) can be found again for every word.

Markup is blanked out of a copy of the text of the same length (tags, heading marks, bullets, emphasis,
math fences) and the words are what is left between spaces, so offsets never need to be mapped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from worker.engines import table_markup

_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+")
_BULLET = re.compile(r"^[ \t]*([-*+•])[ \t]+(?=\S)")
_NUMBERED = re.compile(r"^[ \t]*\(?\d{1,3}[.)][ \t]+(?=\S)")
_IMAGE_LINE = re.compile(r"^[ \t]*!\[([^\]]*)\]\(([^)]*)\)[ \t]*(?:(\d{1,4})\s*,\s*(\d{1,4})\s*,\s*(\d{1,4})\s*,\s*(\d{1,4}))?[ \t]*$")
_TAG = re.compile(r"<[^>]*>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|`)(?=\S)(.+?)(?<=\S)\1")
_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)]*)\)")
_PIPES = re.compile(r"(?<!\\)\|")
_WORD = re.compile(r"\S+")
_GROUNDED = re.compile(r"!\[([A-Za-z_][\w-]*?)(\+?)\]\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)[ \t]*")
# LightOnOCR-3's labels as ocrq's block kinds; an unknown label (a later checkpoint's) reads as text.
GROUNDED_KINDS = {"title": "title", "section": "title", "list": "list", "table": "table", "chart": "table",
                  "formula": "formula", "image": "figure", "header": "header", "footer": "footer",
                  "page_number": "footer"}


@dataclass(frozen=True)
class Word:
    text: str
    start: int  # offsets of the word in the markdown
    end: int


@dataclass
class MdBlock:
    kind: str  # title, text, list, table, formula, figure
    start: int
    end: int
    words: list[Word] = field(default_factory=list)
    table: table_markup.ParsedTable | None = None  # a table's cells (offsets in the markdown)
    cell_words: list[list[int]] | None = None  # each of its cells' words: indices into words
    box: tuple[int, int, int, int] | None = None  # on a 0–1000 grid, when the model gave one (figures)
    level: int | None = None  # a title's heading level
    label: str | None = None  # the model's own label (grounding mode)


def parse(markdown: str) -> list[MdBlock]:
    """The page's blocks in the order the model wrote them, each with its words."""
    blocks = _segment(markdown)
    for block in blocks:
        masked = _mask(markdown, block)
        block.words = [Word(html.unescape(m.group()), block.start + m.start(), block.start + m.end())
                       for m in _WORD.finditer(masked)]
        if block.kind == "table":
            block.table = table_markup.parse(markdown[block.start:block.end], base=block.start)
            if block.table:
                block.cell_words = table_markup.words_in(block.table.cells, [w.start for w in block.words],
                                                         [w.end for w in block.words])
    return [b for b in blocks if b.words or b.kind == "figure"]


def is_grounded(text: str) -> bool:
    """Whether the text is LightOnOCR-3 grounding output (it starts with a block marker)."""
    return bool(_GROUNDED.match(text.lstrip()))


def parse_grounded(raw: str) -> list[MdBlock]:
    """The model's own blocks, each with its 0–1000 box, its kind from its label, and its words (offsets in raw)."""
    marks = list(_GROUNDED.finditer(raw))
    blocks = []
    for n, mark in enumerate(marks):
        start, end = mark.end(), marks[n + 1].start() if n + 1 < len(marks) else len(raw)
        label = mark.group(1)
        kind = GROUNDED_KINDS.get(label, "text")
        block = MdBlock(kind, start, end, box=tuple(int(v) for v in mark.groups()[2:]), label=label + mark.group(2))
        if kind == "figure":  # its text is a short description of the image, not text on the page
            blocks.append(block)
            continue
        inner = parse(raw[start:end])
        block.words = [Word(w.text, w.start + start, w.end + start) for b in inner for w in b.words]
        tables = [b for b in inner if b.table is not None]
        if kind == "table" and len(tables) == 1:
            first = sum(len(b.words) for b in inner[:inner.index(tables[0])])
            table = tables[0].table
            for cell in table.cells:
                cell.start, cell.end = cell.start + start, cell.end + start
            block.table = table
            block.cell_words = [[first + i for i in cell] for cell in tables[0].cell_words]
        if block.words:
            blocks.append(block)
    return blocks


def grounded_markdown(raw: str) -> str:
    """The grounding output as plain markdown: markers dropped, a continued block joined to the one before."""
    marks = list(_GROUNDED.finditer(raw))
    parts: list[str] = []
    for n, mark in enumerate(marks):
        text = raw[mark.end():marks[n + 1].start() if n + 1 < len(marks) else len(raw)].strip()
        if not text or GROUNDED_KINDS.get(mark.group(1)) == "figure":
            continue
        if mark.group(2) and parts:
            parts[-1] += " " + text
        else:
            parts.append(text)
    return "\n\n".join(parts)


def _lines(markdown: str):
    at = 0
    for line in markdown.splitlines(keepends=True):
        yield at, line
        at += len(line)


def _segment(markdown: str) -> list[MdBlock]:
    blocks: list[MdBlock] = []
    open_block: MdBlock | None = None  # a paragraph or list that the next line may continue
    fence: tuple[MdBlock, str] | None = None  # a table or formula until its closing mark
    for at, line in _lines(markdown):
        end = at + len(line.rstrip("\r\n"))
        stripped = line.strip()
        if fence:
            block, closing = fence
            block.end = end
            if closing in line:
                fence = None
            continue
        if not stripped:
            open_block = None
            continue
        if heading := _HEADING.match(line):
            blocks.append(MdBlock("title", at, end, level=len(heading.group(1))))
            open_block = None
        elif stripped.startswith("|") and len(_PIPES.findall(stripped)) >= 2:
            # A markdown pipe table: its lines run on while they start with a pipe.
            if open_block is None or open_block.kind != "table":
                blocks.append(open_block := MdBlock("table", at, end))
            open_block.end = end
        elif stripped.lower().startswith("<table"):
            blocks.append(block := MdBlock("table", at, end))
            fence = None if "</table" in line.lower() else (block, "</table")
            open_block = None
        elif stripped.startswith(("$$", "\\[")):
            closing = "$$" if stripped.startswith("$$") else "\\]"
            blocks.append(block := MdBlock("formula", at, end))
            fence = None if stripped[2:].find(closing) >= 0 else (block, closing)
            open_block = None
        elif image := _IMAGE_LINE.match(line):
            box = tuple(int(v) for v in image.groups()[2:]) if image.group(3) else None
            blocks.append(MdBlock("figure", at, end, box=box))
            open_block = None
        elif _BULLET.match(line) or _NUMBERED.match(line):
            if open_block is None or open_block.kind != "list":
                blocks.append(open_block := MdBlock("list", at, end))
            open_block.end = end
        elif open_block is not None and open_block.kind != "table":
            open_block.end = end
        else:
            blocks.append(open_block := MdBlock("text", at, end))
    return blocks


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _mask(markdown: str, block: MdBlock) -> str:
    """The block's text with its markup turned to spaces, offsets unchanged."""
    text = markdown[block.start:block.end]
    if block.kind == "figure":  # its alt text names the image, it is not text on the page
        return " " * len(text)
    if block.kind == "formula":
        for fence in ("$$", "\\[", "\\]"):
            text = text.replace(fence, " " * len(fence))
        return text
    text = _TAG.sub(lambda m: " " * len(m.group()), text)
    if block.kind == "table" and text.lstrip().startswith("|"):  # a pipe table's pipes and rule are markup
        text = "".join(" " * len(line.rstrip("\r\n")) + line[len(line.rstrip("\r\n")):]
                       if table_markup.is_separator(line) else _PIPES.sub(" ", line)
                       for line in text.splitlines(keepends=True))
    if block.kind == "title":
        text = _HEADING.sub(lambda m: " " * len(m.group()), text, count=1)
    if block.kind == "list":
        text = "".join(_BULLET.sub(lambda m: " " * len(m.group()), line) for line in text.splitlines(keepends=True))
    text = _LINK.sub(lambda m: " " * (m.start(1) - m.start()) + m.group(1) + " " * (m.end() - m.end(1)), text)
    return _EMPHASIS.sub(lambda m: " " * len(m.group(1)) + m.group(2) + " " * len(m.group(1)), text)
