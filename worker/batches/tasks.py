"""Batch tasks: a page of the listing, the end of a batch, and the batch sweeper."""

from __future__ import annotations

from celery import shared_task

from common.queue import names
from worker.batches import listing, results, sweeper
from worker.context import context_of
from worker.queue.tasks import RETRY_OUTAGES


@shared_task(name=names.LIST_BATCH, bind=True, **RETRY_OUTAGES)
def list_batch(self, batch_id: str) -> None:
    listing.list_next_page(context_of(self.app), batch_id=batch_id)


@shared_task(name=names.FINISH_BATCH, bind=True, **RETRY_OUTAGES)
def finish_batch(self, batch_id: str) -> None:
    results.finish_if_done(context_of(self.app), batch_id=batch_id)


@shared_task(name=names.SWEEP_BATCHES, bind=True)
def sweep_batches(self) -> dict[str, int]:
    return sweeper.sweep(context_of(self.app))
