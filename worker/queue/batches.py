"""celery-batches' task, made to remember each batch's messages while its batch runs.

celery_batches.Batches forgets a batch's requests once it hands the batch to the pool: they are in neither
its buffers nor Celery's reserved requests. A worker's heartbeat lists the pages it holds from those
(liveness.held_pages), so every page of a batch at the engine for longer than a heartbeat looked orphaned, and
the sweeper queued it again while it was being read (seen on the GPU: pages read three times and failed).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection
from typing import Any

from celery.worker.request import Request
from celery_batches import Batches, SimpleRequest
from celery_batches.trace import apply_batches_task


class PageBatches(Batches):
    """Batches whose requests stay listed (held) from arrival until their batch returns or its process is lost."""

    def __init__(self) -> None:
        super().__init__()
        self._running: dict[int, list[Request]] = {}
        self._batch_numbers = itertools.count()

    def held(self) -> list[Request]:
        """This task's messages the worker holds: buffered, waiting for their ETA, or in a batch at work."""
        running = [request for batch in list(self._running.values()) for request in batch]
        return [*self._buffer.queue, *self._pending.queue, *running]

    def flush(self, requests: Collection[Request]) -> Any:
        # Batches.flush of celery-batches 0.11, with the batch kept in _running until a callback.
        requests = list(requests)
        number = next(self._batch_numbers)
        self._running[number] = requests
        acks_early = [r for r in requests if not r.task.acks_late]
        acks_late = [r for r in requests if r.task.acks_late]

        def on_accepted(pid: int, time_accepted: float) -> None:
            for request in acks_early:
                request.acknowledge()

        def on_return(result: Any) -> None:
            for request in acks_late:
                request.acknowledge()
            self._running.pop(number, None)

        def on_lost(exc: Any) -> None:
            # A pool child killed mid-batch: its pages are no longer held, so the sweeper takes them back. Their
            # messages are acked here, or each would keep a prefetch slot until the broker's visibility timeout.
            for request in acks_late:
                request.acknowledge()
            self._running.pop(number, None)

        return self._pool.apply_async(
            apply_batches_task, (self, ([SimpleRequest.from_request(r) for r in requests],), 0, None),
            accept_callback=on_accepted, callback=on_return, error_callback=on_lost)
