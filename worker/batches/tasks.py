"""Batch tasks: a page of the listing, the end of a batch, and the batch sweeper."""

from __future__ import annotations

from celery import shared_task

from common.queue import names
from worker.batches import listing, results, sweeper
from worker.context import context_of
from worker.jobs.ending import close_item
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


@shared_task(name=names.ITEM_ENDED, bind=True, **RETRY_OUTAGES)
def item_ended(self, job_id: str) -> None:
    """A batch job ended outside a worker (canceled through the API): record its item."""
    close_item(context_of(self.app), job_id=job_id)
