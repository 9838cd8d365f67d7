"""The Celery application factory; the API uses it to publish, the worker to consume."""

from __future__ import annotations

from celery import Celery

from common.queue.config import build_config
from common.settings import Settings


def create_celery(settings: Settings) -> Celery:
    app = Celery("ocrq")
    app.config_from_object(build_config(settings))
    app.ocrq_settings = settings
    if settings.is_embedded_broker:
        settings.broker_folder.mkdir(parents=True, exist_ok=True)
        (settings.broker_folder.parent / "broker-control").mkdir(parents=True, exist_ok=True)
    return app
