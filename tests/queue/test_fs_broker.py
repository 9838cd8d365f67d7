"""The embedded broker's message files: a consumer never sees one half written, and two never take one."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection
from kombu.transport import filesystem

from common.queue import fs_broker
from common.queue.config import build_config
from common.queue.depth import QueueDepths
from common.settings import Settings


def watch_while_writing(transport, folder) -> list[str]:
    """Put one large message through TRANSPORT while reading every .msg file that appears; what failed to decode."""
    with Connection(transport=transport, transport_options={"data_folder_in": str(folder),
                                                            "data_folder_out": str(folder)}) as conn:
        channel = conn.channel()
        payload = {"body": "x" * 64_000_000}
        writer = threading.Thread(target=channel._put, args=("ocrq.control", payload))
        failures = []
        writer.start()
        while writer.is_alive():
            for path in folder.glob("*.msg"):
                try:
                    json.loads(path.read_bytes())
                except ValueError as exc:
                    failures.append(f"{path.name}: {exc}")
        writer.join()
        return failures


def test_a_message_file_appears_only_once_it_is_whole(tmp_path):
    failures = watch_while_writing(fs_broker.Transport, tmp_path)
    assert failures == []
    assert [p.name.endswith(".ocrq.control.msg") for p in tmp_path.iterdir()] == [True]


def test_kombus_own_transport_shows_half_written_files(tmp_path):
    """What the worker tripped on: kombu creates the file, then writes into it."""
    failures = watch_while_writing(filesystem.Transport, tmp_path)
    if not failures:
        pytest.skip("the write finished before a read caught it (a fast disk); nothing to compare")
    assert "Expecting value" in failures[0] or "Unterminated" in failures[0]


def test_the_embedded_app_uses_it_and_queue_depths_skip_partial_files(tmp_path):
    settings = Settings(home=tmp_path)
    assert build_config(settings)["broker_transport"] == fs_broker.TRANSPORT
    assert build_config(Settings(home=tmp_path, broker_url="redis://127.0.0.1:6379/0"))["broker_transport"] is None
    folder = settings.broker_folder
    folder.mkdir(parents=True)
    (folder / ".1_ab.ocrq.control.msg.partial").write_text("{")
    (folder / "2_cd.ocrq.control.msg").write_text("{}")
    assert QueueDepths(settings, known=["ocrq.control"]).read()["ocrq.control"] == 1


def take_all_at_once(transport, folder, *, consumers: int = 4, messages: int = 300) -> tuple[list[int], list[str]]:
    """Put `messages` numbered messages in the folder, then let `consumers` threads (each with its own
    connection, as `ocrq serve`'s page workers are processes of their own) take them until none is left: the
    numbers taken, and what the consumers failed with."""
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    with Connection(transport=fs_broker.Transport, transport_options=options) as conn:
        for n in range(messages):
            conn.channel()._put("ocrq.pages", {"n": n, "pad": "x" * 100_000})  # a wider window for a copy
    taken: list[int] = []
    errors: list[str] = []
    start = threading.Barrier(consumers)

    def consume() -> None:
        with Connection(transport=transport, transport_options=options) as conn:
            channel = conn.channel()
            start.wait()
            while True:
                try:
                    taken.append(channel._get("ocrq.pages")["n"])
                except Empty:
                    return
                except Exception as exc:  # noqa: BLE001 (what kombu's transport fails with is the finding)
                    errors.append(type(exc).__name__)

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return taken, errors


@pytest.fixture()
def temporary_folder_elsewhere(tmp_path, monkeypatch):
    """The temporary folder on another file system than the queue's, where moving a file is a copy and a delete."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system for the temporary folder")
    elsewhere = Path(tempfile.mkdtemp(dir=shm))
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    yield elsewhere
    shutil.rmtree(elsewhere, ignore_errors=True)


def test_consumers_taking_at_once_each_get_a_message_once(tmp_path, temporary_folder_elsewhere):
    taken, errors = take_all_at_once(fs_broker.Transport, tmp_path)
    assert errors == [] and sorted(taken) == list(range(300))
    assert not list(temporary_folder_elsewhere.iterdir()) and not list(tmp_path.glob("*claimed"))


def test_kombus_own_transport_hands_one_message_to_two_consumers(tmp_path, temporary_folder_elsewhere):
    """What two page workers would meet: kombu's consumer moves the file to the temporary folder, a copy and a
    delete across file systems; another consumer copies it too in between, or reads it half copied."""
    taken, errors = take_all_at_once(filesystem.Transport, tmp_path)
    if not errors and sorted(taken) == list(range(300)):
        pytest.skip("no two consumers met on one message this time; nothing to compare")
    assert len(taken) > len(set(taken)) or "JSONDecodeError" in errors or "ChannelError" in errors


def bind_at_once(transport, folder, *, workers: int = 6, rounds: int = 15) -> list[str]:
    """`workers` connections binding a queue each to one exchange at once, as page workers starting together
    declare their queues; what failed, or which bindings the table lost."""
    problems: list[str] = []
    for n in range(rounds):
        options = {"data_folder_in": str(folder), "data_folder_out": str(folder),
                   "control_folder": str(folder / f"control-{n}")}
        start = threading.Barrier(workers)

        def bind(i: int, options=options, start=start) -> None:
            with Connection(transport=transport, transport_options=options) as conn:
                channel = conn.channel()
                start.wait()
                try:
                    channel._queue_bind("ocrq.pages", f"q{i}", None, f"q{i}")
                except Exception as exc:  # noqa: BLE001 (what kombu's transport fails with is the finding)
                    problems.append(type(exc).__name__)

        threads = [threading.Thread(target=bind, args=(i,)) for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with Connection(transport=fs_broker.Transport, transport_options=options) as conn:
            try:
                bound = {row.queue for row in conn.channel().get_table("ocrq.pages")}
            except ValueError:
                problems.append("table unreadable")
                continue
        problems += [f"lost q{i}" for i in range(workers) if f"q{i}" not in bound]
    return problems


def test_workers_declaring_their_queues_at_once_all_stay_bound(tmp_path):
    assert bind_at_once(fs_broker.Transport, tmp_path) == []


def test_kombus_own_bindings_break_when_workers_start_together(tmp_path):
    """What two page workers starting together met: one read the table file the other had just created, empty."""
    problems = bind_at_once(filesystem.Transport, tmp_path)
    if not problems:
        pytest.skip("no two bindings met this time; nothing to compare")
    assert {"JSONDecodeError", "table unreadable"} & set(problems) or any(p.startswith("lost") for p in problems)


def test_a_table_left_half_written_by_kombus_own_is_started_afresh(tmp_path):
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path),
               "control_folder": str(tmp_path / "control")}
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "ocrq.pages.exchange").write_text('[["q0", "", "q0"], ["q1"')
    with Connection(transport=fs_broker.Transport, transport_options=options) as conn:
        channel = conn.channel()
        channel._queue_bind("ocrq.pages", "q2", None, "q2")
        assert [row.queue for row in channel.get_table("ocrq.pages")] == ["q2"]
