"""Dependencies the routes declare; clients come from the app's lifespan, never from globals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from common.services import Services
from common.tenancy import keys
from common.tenancy.rate_limit import retry_after_header


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.services.db.session() as session:
        yield session


ServicesDep = Annotated[Services, Depends(get_services)]
SessionDep = Annotated[Session, Depends(get_session)]


def get_tenant(request: Request, svc: ServicesDep) -> str:
    """The tenant of the bearer key; 401 without a valid one (unless auth is off, on loopback only)."""
    if svc.settings.auth_disabled:
        return "default"
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "missing bearer API key", headers={"WWW-Authenticate": "Bearer"})
    return _tenant_of(svc, token)


def get_key_tenant(request: Request, svc: ServicesDep) -> str:
    """As get_tenant, the key also taken from `X-Api-Key`: how docling-serve's clients send it."""
    if svc.settings.auth_disabled or request.headers.get("authorization") or not request.headers.get("x-api-key"):
        return get_tenant(request, svc)
    return _tenant_of(svc, request.headers["x-api-key"])


def _tenant_of(svc: Services, token: str) -> str:
    tenant = tenant_of_key(svc, token)
    if tenant is None:
        raise HTTPException(401, "invalid or revoked API key", headers={"WWW-Authenticate": "Bearer"})
    return tenant


def tenant_of_key(svc: Services, token: str | None) -> str | None:
    """The tenant of a key, None for a missing, unknown or revoked one ("default" while auth is off)."""
    if svc.settings.auth_disabled:
        return "default"
    if not token or not token.strip():
        return None
    with svc.db.session() as session:
        return keys.tenant_for(session, key=token.strip())


def get_limited_tenant(svc: ServicesDep, tenant: Annotated[str, Depends(get_tenant)]) -> str:
    """The tenant, once its requests-per-second limit lets this request through; 429 with Retry-After if not."""
    decision = svc.limiter.hit(tenant)
    if not decision.allowed:
        raise HTTPException(429, "too many requests for this tenant; slow down",
                            headers={"Retry-After": retry_after_header(decision)})
    return tenant


TenantDep = Annotated[str, Depends(get_limited_tenant)]


def get_limited_key_tenant(svc: ServicesDep, tenant: Annotated[str, Depends(get_key_tenant)]) -> str:
    return get_limited_tenant(svc, tenant)


# The tenant of a Bearer or an X-Api-Key key (docling-serve's routes), rate-limited as TenantDep.
KeyTenantDep = Annotated[str, Depends(get_limited_key_tenant)]
