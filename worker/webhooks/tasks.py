"""Webhook tasks: one try of a delivery, and the sweep that republishes due ones."""

from __future__ import annotations

from celery import shared_task

from common.queue import names
from worker.context import context_of
from worker.queue.tasks import RETRY_OUTAGES
from worker.webhooks import delivery, sweeper


@shared_task(name=names.DELIVER_WEBHOOK, bind=True, **RETRY_OUTAGES)
def deliver_webhook(self, delivery_id: str) -> str | None:
    return delivery.deliver(context_of(self.app), delivery_id=delivery_id)


@shared_task(name=names.SWEEP_WEBHOOKS, bind=True)
def sweep_webhooks(self) -> int:
    return sweeper.republish_due(context_of(self.app))
