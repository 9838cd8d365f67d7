"""The messages workers hold unacked, as kombu's Redis transport keeps them, and dropping a dead worker's.

kombu keeps each message a worker takes (prefetched, running, or waiting out an ETA or countdown) in the hash
"unacked" (delivery tag -> [message, exchange, routing key]) and the time it was taken in the sorted set
"unacked_index", until the worker acks it. Nothing records which worker holds it. Past the visibility timeout any
worker's scan puts it back in its queue (QoS.restore_visible), the same page an hour later. The filesystem broker
has no acks: nothing is held there.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import redis

UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"


@dataclass(frozen=True)
class HeldMessage:
    tag: str
    args: list
    taken_at: float  # when a worker took it (time.time()), 0 if unknown


def read_held(client: redis.Redis, prefix: str) -> list[HeldMessage]:
    """Every message held unacked under the key prefix, with the positional args of its task."""
    with client.pipeline(transaction=True) as pipe:
        raws, taken = pipe.hgetall(prefix + UNACKED_KEY).zrange(prefix + UNACKED_INDEX_KEY, 0, -1,
                                                               withscores=True).execute()
    taken_at = {tag.decode(): score for tag, score in taken}
    held = []
    for tag, raw in raws.items():
        args = _task_args(raw)
        if args is not None:
            held.append(HeldMessage(tag=tag.decode(), args=args, taken_at=taken_at.get(tag.decode(), 0.0)))
    return held


def drop_held(client: redis.Redis, prefix: str, *, first_args: set[str], taken_before: float) -> int:
    """Remove the held messages whose first task argument is in `first_args`, taken before `taken_before`: their
    work was published again, and their holder is gone. Returns how many; an ack that follows is a no-op."""
    tags = [m.tag for m in read_held(client, prefix)
            if m.args and str(m.args[0]) in first_args and m.taken_at < taken_before]
    if not tags:
        return 0
    with client.pipeline(transaction=True) as pipe:
        dropped, _ = pipe.hdel(prefix + UNACKED_KEY, *tags).zrem(prefix + UNACKED_INDEX_KEY, *tags).execute()
    return dropped


def _task_args(raw: bytes) -> list | None:
    try:
        message = json.loads(raw)[0]
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        return list(json.loads(body)[0])
    except (ValueError, KeyError, IndexError, TypeError):
        return None
