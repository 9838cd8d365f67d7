"""Celery's filesystem broker (the embedded default), with each message file written whole before it appears.

kombu's transport creates a message's file and then writes into it. A consumer listing the folder in
between takes the still-empty file, fails to decode it, and the Celery worker stops ("Unrecoverable error:
JSONDecodeError"). Here the message is written under a name no consumer matches, then renamed into place
(common.files.write_atomically).
"""

from __future__ import annotations

import os
import time
import uuid

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

from common.files import write_atomically

TRANSPORT = f"{__name__}:Transport"


class Channel(filesystem.Channel):
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
