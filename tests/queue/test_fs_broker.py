"""The embedded broker's message files: a consumer never sees one half written."""

from __future__ import annotations

import json
import threading

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
