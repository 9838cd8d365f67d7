"""Celery's filesystem broker (the embedded default), with each message file written whole before it appears.

kombu's transport creates a message's file and then writes into it. A consumer listing the folder in
between takes the still-empty file, fails to decode it, and the Celery worker stops ("Unrecoverable error:
JSONDecodeError"). Here the message is written under a name no consumer matches, then renamed into place
(common.files.write_atomically), and a consumer claims one by renaming it within the folder (Channel._get). The
exchanges' tables in the control folder are written whole too (Channel._queue_bind).
"""

from __future__ import annotations

import os
import time
import uuid
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

from common.files import write_atomically

TRANSPORT = f"{__name__}:Transport"


class Channel(filesystem.Channel):
    def _get(self, queue):
        """The queue's oldest message, claimed by renaming it within the folder: kombu's own moves it to the
        temporary folder, which is a copy and a delete where that folder is on another file system, so two
        consumers (`ocrq serve` runs one page worker per core) could both take it."""
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != f"{queue}.msg":
                continue
            mine = os.path.join(self.data_folder_in, f".{uuid.uuid4().hex}.claimed")
            try:
                os.rename(os.path.join(self.data_folder_in, name), mine)
            except OSError:
                continue  # another consumer took it first
            try:
                with open(mine, "rb") as f:
                    payload = f.read()
                os.remove(mine)
            except OSError as exc:
                raise ChannelError(f"Cannot read message {name!r} from the queue.") from exc
            return loads(bytes_to_str(payload))
        raise Empty()

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        """Add a queue to the exchange's table in the control folder, the whole table written at once. kombu's own
        creates the file, then locks and writes it: a worker starting beside another (`ocrq serve` starts one page
        worker per core) read the empty file, and Celery stopped ("Unrecoverable error: JSONDecodeError")."""
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with open(file.with_name(f".{file.name}.lock"), "ab") as guard:
            filesystem.lock(guard, filesystem.LOCK_EX)
            try:
                try:
                    table = [filesystem.exchange_queue_t(*row) for row in loads(bytes_to_str(file.read_bytes()))]
                except (FileNotFoundError, ValueError):  # none yet, or one kombu's own left half written:
                    table = []  # each consumer binds its queues as it starts
                if entry not in table:
                    write_atomically(file, str_to_bytes(dumps([entry, *table])))
            except OSError as exc:
                raise ChannelError(f"Cannot bind {queue!r} to {exchange!r}.") from exc
            finally:
                filesystem.unlock(guard)

    def _put(self, queue, payload, **kwargs):
        # kombu's own name: time-ordered, so the folder reads first in, first out.
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        try:
            write_atomically(final, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
