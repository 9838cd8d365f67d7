"""/batches: ingest an S3 prefix, follow its progress, cancel it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from api.deps import ServicesDep, SessionDep, TenantDep
from api.idempotency import IdempotencyKeyHeader, replayed
from common import listing
from common.batches import service as batches
from common.batches.models import Batch
from common.batches.objects import S3Prefix
from common.batches.progress import progress
from common.batches.schemas import (
    BatchAccepted,
    BatchCreate,
    BatchLinks,
    BatchList,
    BatchPages,
    BatchRates,
    BatchStatus,
    BatchView,
)
from common.tenancy import idempotency

router = APIRouter(prefix="/batches", tags=["batches"])


def links(request: Request, batch: Batch) -> BatchLinks:
    return BatchLinks(self=f"{str(request.base_url).rstrip('/')}/batches/{batch.id}", manifest=batch.manifest_key)


@router.post("", status_code=202, response_model=BatchAccepted,
             responses={400: {}, 401: {}, 409: {}, 422: {}, 429: {}, 503: {}})
def create_batch(body: BatchCreate, request: Request, svc: ServicesDep, tenant: TenantDep,
                 idempotency_key: IdempotencyKeyHeader = None) -> Response:
    """Read every document under `input_prefix`; each result is written under `output_prefix`."""
    fingerprint = idempotency.fingerprint("POST /batches", body.model_dump(mode="json"))
    with idempotency.idempotent(svc, tenant_id=tenant, key=idempotency_key, fingerprint=fingerprint) as slot:
        if slot.replay:
            return replayed(slot.replay)

        def accepted(batch: Batch) -> dict:
            return BatchAccepted(id=batch.id, status=batch.status, links=links(request, batch)).model_dump(mode="json")

        batch = batches.create_batch(svc, tenant_id=tenant, request=body,
                                     record=lambda session, batch: slot.save(session, 202, accepted(batch)))
    return JSONResponse(accepted(batch), status_code=202)


@router.get("", response_model=BatchList, responses={422: {}})
def list_batches(request: Request, session: SessionDep, tenant: TenantDep,
                 status: Annotated[list[BatchStatus] | None, Query()] = None,
                 cursor: Annotated[str | None, Query(max_length=512)] = None,
                 limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = 50) -> BatchList:
    """The tenant's batches, newest first, with their progress; `next` is the cursor of the following page."""
    rows, after = batches.list_batches(session, tenant_id=tenant, status=tuple(status or ()), cursor=cursor,
                                       limit=limit)
    return BatchList(batches=[view(request, session, batch) for batch in rows], next=after)


@router.get("/{batch_id}", response_model=BatchView, responses={404: {}})
def get_batch(batch_id: str, request: Request, session: SessionDep, tenant: TenantDep) -> BatchView:
    """Counts of objects by state, pages, rates and ETA."""
    return view(request, session, batches.get_batch(session, tenant_id=tenant, batch_id=batch_id))


@router.delete("/{batch_id}", response_model=BatchView, responses={404: {}})
def cancel_batch(batch_id: str, request: Request, svc: ServicesDep, session: SessionDep,
                 tenant: TenantDep) -> BatchView:
    """Cancel: the listing stops and objects not yet started are dropped; running ones finish."""
    batch = batches.cancel_batch(svc, tenant_id=tenant, batch_id=batch_id)
    return view(request, session, batch)


@router.post("/{batch_id}/erase", response_model=BatchView, responses={202: {}, 404: {}})
def erase_batch(batch_id: str, request: Request, svc: ServicesDep, session: SessionDep, tenant: TenantDep) -> Response:
    """Erase the batch with every job of it (as POST /jobs/{id}/erase); 202 while storage is unreachable."""
    batch, pending = batches.erase_batch(svc, tenant_id=tenant, batch_id=batch_id)
    return JSONResponse(view(request, session, batch).model_dump(mode="json"), status_code=202 if pending else 200)


def view(request: Request, session, batch: Batch) -> BatchView:
    state = progress(session, batch=batch)
    return BatchView(
        id=batch.id, status=batch.status, input_prefix=S3Prefix(batch.input_bucket, batch.input_prefix).uri,
        output_prefix=S3Prefix(batch.output_bucket, batch.output_prefix).uri, include=batch.include,
        exclude=batch.exclude, output=batch.output, output_formats=batch.output_formats or [],
        priority=batch.priority, source_profile=batch.source_profile,
        metadata=batch.meta, **state.counts, listing_done=batch.listing_done,
        pages=BatchPages(total=state.pages_total, done=state.pages_done, failed=state.pages_failed),
        rates=BatchRates(objects_per_s=state.objects_per_s, pages_per_s=state.pages_per_s), eta_s=state.eta_s,
        error=batch.error, manifest=batch.manifest_key, created_at=batch.created_at, listed_at=batch.listed_at,
        finished_at=batch.finished_at, erased_at=batch.erased_at, links=links(request, batch),
    )
