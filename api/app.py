"""The FastAPI application factory; clients are built in the lifespan and closed after."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api import errors
from api.body_limit import BodySizeLimit
from api.metrics import ApiMetrics
from api.routers import batches, docling, docs, events, health, jobs, mcp, metrics, openwebui, web, webhooks
from common import tracing
from common.db import Database
from common.queue.app import create_celery
from common.services import Services
from common.settings import Settings, get_settings
from common.storage import make_storage
from common.tenancy import keys
from common.tenancy.rate_limit import make_rate_limiter
from common.tenancy.s3_grants import S3Clients


def build_services(settings: Settings) -> Services:
    return Services(
        settings=settings, db=Database(settings.resolved_database_url), storage=make_storage(settings),
        celery=create_celery(settings), limiter=make_rate_limiter(settings),
        s3_clients=S3Clients(settings),
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
        async with mcp.running(app):
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
    app.include_router(events.router)
    app.include_router(webhooks.router)
    app.include_router(metrics.router)
    app.include_router(web.router)
    app.include_router(docs.router)
    app.include_router(docling.router)
    app.include_router(openwebui.router)
    mcp.mount(app)
    app.mount("/static", web.static_files(), name="static")
    app.mount(docs.ASSETS_URL, docs.assets(), name="docs-assets")
    app.openapi = lambda: _openapi(app)
    tracing.instrument_app(app, settings)
    return app


def _openapi(app: FastAPI) -> dict:
    """FastAPI's schema, plus the models that routes reading their own bodies name by $ref."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        # FastAPI documents its own 422 body; every error here has the one shape of api.errors.
        components["HTTPValidationError"] = errors.ErrorBody.model_json_schema()
        components.pop("ValidationError", None)
        for model in jobs.BODY_MODELS:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        app.openapi_schema = schema
    return app.openapi_schema
