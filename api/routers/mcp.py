"""ocrq's MCP server over streamable HTTP at /mcp, beside the API (ocrq/mcp_server.py holds the tools).

Stateless (a request is a whole exchange), so any API process answers any call. A request without a bearer key
is refused at the door; with one, each tool call is made to this same app in-process with that key, and the API
checks it, the tenant and the limits as for any call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.errors import problem
from ocrq.mcp_server import build_server, http_client_for

PATH = "/mcp"


def mount(app: FastAPI) -> None:
    """Add /mcp to the app; `running` (in the app's lifespan) puts a server behind it."""
    app.router.routes.append(Route(PATH, endpoint=_Endpoint(), methods=["GET", "POST", "DELETE"],
                                   include_in_schema=False))


@asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[None]:
    """A fresh MCP server and session manager for this run of the app (a manager runs once)."""
    server = build_server(http_client_for(httpx.ASGITransport(app=app), "http://ocrq.internal"), local_files=False)
    # No DNS-rebinding check on the Host header: every call carries the tenant's key, which a rebinding page lacks.
    # The app's own body limit (api/app.py: an upload and its framing) rather than the SDK's 4 MiB; a document
    # sent as base64_data counts at its base64 size.
    max_body = app.state.services.settings.max_upload_bytes + 64 * 1024
    inner = server.streamable_http_app(streamable_http_path=PATH, stateless_http=True, json_response=True,
                                       max_request_body_size=max_body,
                                       transport_security=TransportSecuritySettings(
                                           enable_dns_rebinding_protection=False))
    app.state.mcp_endpoint = next(route.endpoint for route in inner.routes if getattr(route, "path", None) == PATH)
    async with server.session_manager.run():
        yield
    app.state.mcp_endpoint = None


class _Endpoint:
    """The running server's handler; 401 in the API's error shape for a request without a bearer key."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        handler = getattr(scope["app"].state, "mcp_endpoint", None)
        if scheme.lower() != "bearer" or not token.strip():
            response = problem(401, "missing bearer API key", headers={"WWW-Authenticate": "Bearer"})
        elif handler is None:
            response = problem(503, "the MCP server is not running", code="unavailable")
        else:
            await handler(scope, receive, send)
            return
        await response(scope, receive, send)
