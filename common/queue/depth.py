"""How many messages wait in each ocrq.* queue, read from the broker itself (Redis or the embedded folder)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import redis

from common.queue.unacked import HeldMessage, drop_held, read_held
from common.settings import Settings

QUEUE_PREFIX = "ocrq."
# kombu keeps a Redis queue as one list per priority step: "name", then "name" + "\x06\x16" + "3", "6", "9".
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = ("3", "6", "9")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


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

    def held(self) -> list[HeldMessage]:
        """Every message a worker took and has not acked (prefetched, running, or waiting for its ETA)."""
        return [] if self.redis is None else read_held(self.redis, self.prefix)

    def held_task_args(self) -> list[list]:
        """The positional args of every message a worker took and has not acked."""
        return [message.args for message in self.held()]

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


def broker_snapshot(settings: Settings) -> tuple[dict[str, int], dict[str, float]]:
    """Messages waiting in each ocrq.* queue, and the ids (first task argument) of the tasks workers hold unacked
    with when the last copy was taken, over one connection."""
    reader = QueueDepths(settings, known=())
    try:
        # Queues first: a message a worker takes in between is then seen held, never in neither place.
        depths = reader.read()
        held: dict[str, float] = {}
        for message in reader.held():
            if message.args:
                held[str(message.args[0])] = max(message.taken_at, held.get(str(message.args[0]), 0.0))
        return depths, held
    finally:
        reader.close()


def drop_held_pages(settings: Settings, *, page_ids: list[str], taken_before: float) -> int:
    """Drop the unacked messages of these pages taken before `taken_before` (time.time()): published again since,
    they would otherwise come back at the visibility timeout. Returns how many."""
    reader = QueueDepths(settings, known=())
    try:
        if reader.redis is None or not page_ids:
            return 0
        return drop_held(reader.redis, reader.prefix, first_args=set(page_ids), taken_before=taken_before)
    finally:
        reader.close()
