"""Atomic writes: racing writers of one key all succeed with one whole file; a failed write leaves nothing behind."""

from __future__ import annotations

import io
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from common.files import atomic_path, write_atomically
from common.storage import FileStorage

WRITERS = 8
SIZE = 512 * 1024  # large enough that writes overlap


def _payload(i: int) -> bytes:
    return bytes([i]) * SIZE


def _put_from_a_process(root: str, i: int, start) -> None:
    start.wait()
    FileStorage(Path(root)).put("results/job/page-1.json", _payload(i))


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".part")]


def test_threads_putting_one_key_at_once_all_succeed_with_one_whole_file(tmp_path):
    storage = FileStorage(tmp_path)
    start, errors = threading.Barrier(WRITERS), []

    def put(i: int) -> None:
        start.wait()
        try:
            # A bytes payload and a stream alike.
            storage.put("results/job/page-1.json", _payload(i) if i % 2 else io.BytesIO(_payload(i)))
        except Exception as exc:  # noqa: BLE001 - every writer's failure is the finding
            errors.append(exc)

    for _round in range(5):
        threads = [threading.Thread(target=put, args=(i,)) for i in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        data = storage.read("results/job/page-1.json")
        assert data in {_payload(i) for i in range(WRITERS)}
        assert _leftovers(tmp_path / "results" / "job") == []


def test_processes_putting_one_key_at_once_all_succeed_with_one_whole_file(tmp_path):
    context = multiprocessing.get_context("fork")
    start = context.Barrier(WRITERS)
    processes = [context.Process(target=_put_from_a_process, args=(str(tmp_path), i, start)) for i in range(WRITERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)
    assert [p.exitcode for p in processes] == [0] * WRITERS
    assert FileStorage(tmp_path).read("results/job/page-1.json") in {_payload(i) for i in range(WRITERS)}
    assert _leftovers(tmp_path / "results" / "job") == []


class _Broken(io.RawIOBase):
    """A stream that gives some bytes, then fails as a dropped upload would."""

    def __init__(self) -> None:
        self.sent = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.sent:
            raise ConnectionResetError("upload cut off")
        self.sent = True
        buffer[:4] = b"half"
        return 4


def test_a_failed_write_removes_its_temporary_file_and_keeps_the_old_one(tmp_path):
    target = tmp_path / "page.json"
    write_atomically(target, b"old")
    with pytest.raises(ConnectionResetError):
        write_atomically(target, _Broken())
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["page.json"]

    with pytest.raises(RuntimeError), atomic_path(tmp_path / "copy") as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("download failed")
    assert os.listdir(tmp_path) == ["page.json"]


def test_files_get_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "a", b"x")
    finally:
        os.umask(umask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o644
