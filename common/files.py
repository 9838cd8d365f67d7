"""Writing a file that others read while it changes: a reader sees the old whole file or the new one, never a part.

The data goes to a temporary file of a unique name beside the target, which is then renamed onto it
(os.replace, atomic within one file system). Two writers racing for one target each write their own
temporary file, and the last rename wins with a whole file. A write that fails removes its temporary file.
Temporary names start with a dot and end in ".part", so nothing that lists the folder for its targets takes them.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A new empty file beside `path` for the block to fill; renamed onto `path` if the block succeeds, else removed."""
    path = Path(path)
    tmp = _create_unique(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path | str, data: bytes | BinaryIO) -> None:
    """Write bytes, or everything a binary stream holds, to `path` in one step; the folder must exist."""
    with atomic_path(path) as tmp, tmp.open("wb") as out:
        if isinstance(data, bytes | bytearray | memoryview):
            out.write(data)
        else:
            shutil.copyfileobj(data, out)


def _create_unique(path: Path) -> Path:
    # What tempfile.mkstemp does (O_EXCL on a random name), but with mode 0o666 less the umask as open() gives,
    # where mkstemp's files are 0o600: stored files keep the permissions they had before.
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.part")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
