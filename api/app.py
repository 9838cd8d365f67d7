"""The FastAPI application factory; clients are built in the lifespan and closed after."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from api import errors
from api.body_limit import BodySizeLimit
from api.metrics import ApiMetrics
from api.routers import batches, health, jobs
from api.routers import docs, metrics, web, webhooks
from common.db import Database
from common.rate_limit import make_rate_limiter
from common.services import keys
from common.services.jobs import Services
from common.settings import Settings, get_settings
from common.storage import make_storage, s3_client
from worker.celery_app import create_celery


def build_services(settings: Settings) -> Services:
    return Services(
        settings=settings, db=Database(settings.resolved_database_url), storage=make_storage(settings),
        celery=create_celery(settings), s3=s3_client(settings), limiter=make_rate_limiter(settings),
    )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc = build_services(settings)
        with svc.db.session() as session:
            for tenant_id, key in keys.parse_configured(settings.api_keys):
                keys.ensure_key(session, tenant_id=tenant_id, key=key)
        app.state.services = svc
        app.state.metrics = ApiMetrics(svc)
        yield
        app.state.metrics.close()
        svc.limiter.close()
        svc.db.dispose()

    app = FastAPI(title="ocrq", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Asynchronous OCR jobs: upload or point at documents, poll or get a webhook.")
    # Multipart overhead on top of the largest allowed file.
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes + 64 * 1024)
    errors.install(app)
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(batches.router)
    app.include_router(webhooks.router)
    app.include_router(metrics.router)
    app.include_router(web.router)
    app.include_router(docs.router)
    app.mount("/static", web.static_files(), name="static")
    app.mount(docs.ASSETS_URL, docs.assets(), name="docs-assets")
    return app
