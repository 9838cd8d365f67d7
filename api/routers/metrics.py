"""GET /metrics: Prometheus text, from the registry the app's lifespan built."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

router = APIRouter(tags=["health"])


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Jobs, pages and queues now; worker histograms and counters; engine KV cache and requests."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
