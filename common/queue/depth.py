"""How many messages wait in each ocrq.* queue, read from the broker itself (Redis or the embedded folder)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path

import redis

from common.settings import Settings

QUEUE_PREFIX = "ocrq."
# kombu keeps a Redis queue as one list per priority step: "name", then "name" + "\x06\x16" + "3", "6", "9".
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = ("3", "6", "9")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
UNACKED_KEY = "unacked"


class QueueDepths:
    """Reads queue depths for /metrics; every ocrq.* queue found, plus the `known` ones even when empty."""

    def __init__(self, settings: Settings, *, known: Iterable[str]) -> None:
        self.known = {q for q in known if q.startswith(QUEUE_PREFIX)}
        self.folder: Path | None = None
        self.redis: redis.Redis | None = None
        if settings.is_embedded_broker:
            self.folder = settings.broker_folder
        elif settings.resolved_broker_url.startswith(REDIS_SCHEMES):
            self.redis = redis.Redis.from_url(settings.resolved_broker_url, socket_timeout=3,
                                              socket_connect_timeout=3)
            # Celery's global_keyprefix (OCRQ_BROKER_KEY_PREFIX) is prepended to every key it writes.
            self.prefix = settings.broker_key_prefix
        else:
            raise ValueError(f"queue depth needs a Redis or filesystem broker, not {settings.resolved_broker_url}")

    def read(self) -> dict[str, int]:
        """Messages waiting per queue, by queue name."""
        return self._from_folder() if self.folder is not None else self._from_redis()

    def _from_folder(self) -> dict[str, int]:
        depths = dict.fromkeys(self.known, 0)
        if not self.folder.is_dir():
            return depths
        # The filesystem transport names each message "<time>_<uuid>.<queue>.msg".
        for name in (entry.name for entry in self.folder.iterdir()):
            queue = name.partition(".")[2].removesuffix(".msg")
            if name.endswith(".msg") and queue.startswith(QUEUE_PREFIX):
                depths[queue] = depths.get(queue, 0) + 1
        return depths

    def _from_redis(self) -> dict[str, int]:
        pattern = _glob_escape(self.prefix + QUEUE_PREFIX) + "*"
        found = set(self.known)
        for key in self.redis.scan_iter(match=pattern, count=1000, _type="list"):
            found.add(key.decode()[len(self.prefix):].partition(PRIORITY_SEP)[0])
        queues = sorted(found)
        with self.redis.pipeline(transaction=False) as pipe:
            for queue in queues:
                for suffix in ("", *(PRIORITY_SEP + step for step in PRIORITY_STEPS)):
                    pipe.llen(self.prefix + queue + suffix)
            lengths = pipe.execute()
        steps = 1 + len(PRIORITY_STEPS)
        return {queue: sum(lengths[i * steps:(i + 1) * steps]) for i, queue in enumerate(queues)}

    def held_task_args(self) -> list[list]:
        """The positional args of every message a worker took and has not acked (prefetched or running).

        kombu's Redis transport keeps each one in the "unacked" hash until the ack, and puts it back in its
        queue itself once the visibility timeout passes; a Redis restarted without persistence loses both.
        The filesystem broker has no acks: nothing is held there.
        """
        if self.redis is None:
            return []
        held = []
        for raw in self.redis.hvals(self.prefix + UNACKED_KEY):
            try:
                message = json.loads(raw)[0]
                body = message["body"]
                if message.get("properties", {}).get("body_encoding") == "base64":
                    body = base64.b64decode(body)
                held.append(list(json.loads(body)[0]))
            except (ValueError, KeyError, IndexError, TypeError):
                continue
        return held

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def depths_of(settings: Settings, queues: Iterable[str]) -> dict[str, int]:
    """Messages waiting in each of `queues` now (a passive declare would fail on an empty Redis queue)."""
    queues = list(queues)
    reader = QueueDepths(settings, known=queues)
    try:
        found = reader.read()
    finally:
        reader.close()
    return {queue: found.get(queue, 0) for queue in queues}


def broker_snapshot(settings: Settings) -> tuple[dict[str, int], set[str]]:
    """Messages waiting in each ocrq.* queue, and the ids (first task argument) of the tasks workers hold
    unacked, over one connection."""
    reader = QueueDepths(settings, known=())
    try:
        return reader.read(), {str(args[0]) for args in reader.held_task_args() if args}
    finally:
        reader.close()
