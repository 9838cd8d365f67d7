"""ocrq's MCP server (the official `mcp` SDK): tools to submit a document, wait for it, read its text, list jobs.

Every tool is a call of the Python client (ocrq.client) on the ocrq API, so the tenant, its key, the limits and
the SSRF guard are the API's own. Two transports:

- stdio, `ocrq mcp`: the key from OCRQ_API_KEY (or the one `ocrq serve` saved), the API at OCRQ_URL; `path`
  reads a file on the machine that runs `ocrq mcp`, the caller's own.
- streamable HTTP at /mcp beside the API (api/routers/mcp.py): the key from each request's `Authorization:
  Bearer` header, the calls made to the same app in-process. `path` is refused there: it would read the server's
  files.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import ValidationError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ocrq.client import AsyncClient, OcrqError

ReadFormat = Literal["markdown", "text", "json"]
INSTRUCTIONS = ("OCR for scans, photos, PDFs and office files. Call submit with a path, a URL or base64 bytes, "
                "then wait with the job id until it has ended, then result for its text (a page range if long).")
MAX_WAIT_S = 600.0
# The tools' client for one call: (the MCP request's context) -> `async with` it for an AsyncClient on the API.
ClientFor = Callable[[Context], AbstractAsyncContextManager[AsyncClient]]


class ToolRefused(ToolError):
    """A refusal the caller reads ("Error executing tool NAME: " and the sentence); any other exception in a tool
    reaches the caller as that prefix alone, its text kept on the server."""


def build_server(client_for: ClientFor, *, local_files: bool) -> MCPServer:
    """The MCP server; `local_files` lets `submit` read a path (stdio only: the caller's machine)."""
    server = MCPServer("ocrq", instructions=INSTRUCTIONS)

    @server.tool()
    async def submit(ctx: Context, path: str | None = None, url: str | None = None, base64_data: str | None = None,
                     filename: str | None = None, pages: str | None = None, priority: str = "interactive") -> dict:
        """Submit one document for OCR: exactly one of `path` (a local file), `url` (http or https, fetched by
        the service) or `base64_data` (the file's bytes, with `filename`). `pages` selects pages, e.g. "1-3,7".
        Answers the job's id and status; then call wait."""
        given = [name for name, value in (("path", path), ("url", url), ("base64_data", base64_data)) if value]
        if len(given) != 1:
            raise ToolRefused("give exactly one of path, url or base64_data")
        source: str | bytes
        if path:
            if not local_files:
                raise ToolRefused("path is read by `ocrq mcp` on your own machine; over HTTP send base64_data "
                                  "or url")
            if not Path(path).expanduser().is_file():
                raise ToolRefused(f"no file at {path}")
            source = str(Path(path).expanduser())
        elif url:
            if not url.lower().startswith(("http://", "https://")):
                raise ToolRefused("url must be http:// or https://")
            source = url
        else:
            try:
                source = base64.b64decode(base64_data or "", validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ToolRefused("base64_data is not valid base64") from exc
        async with client_for(ctx) as client:
            job = await _call(client.submit(source, filename=filename or ("upload" if base64_data else None),
                                            pages=pages, priority=priority, output="markdown"))
        return {"job_id": job.id, "status": job.status}

    @server.tool()
    async def wait(ctx: Context, job_id: str, timeout_s: float = 120.0) -> dict:
        """Wait up to `timeout_s` seconds (at most 600) for the job to end; answers its status and page counts
        (status still queued or running if the time ran out)."""
        async with client_for(ctx) as client:
            job = client.job(job_id)
            try:
                view = await _call(job.wait(timeout=max(0.0, min(timeout_s, MAX_WAIT_S))))
            except TimeoutError:
                view = await _call(job.get())
        return {"job_id": view.id, "status": view.status, "pages_total": view.pages_total,
                "pages_done": view.pages_done, "pages_failed": view.pages_failed, "error": view.error,
                "page_errors": [e.model_dump() for e in view.page_errors]}

    @server.tool()
    async def result(ctx: Context, job_id: str, format: ReadFormat = "markdown", first_page: int | None = None,
                     last_page: int | None = None) -> str:
        """The text of a job's finished pages: markdown (default), text or json; `first_page`/`last_page`
        (1-based, inclusive) read a part of a long document. Pages still running are not in it yet."""
        low, high = first_page or 1, last_page or 10**9
        if low < 1 or high < low:
            raise ToolRefused("pages are numbered from 1 and last_page may not come before first_page")
        async with client_for(ctx) as client:
            found = [page async for page in _pages(client.job(job_id), format) if low <= page.page <= high]
        if format == "json":
            return json.dumps([page.model_dump(mode="json") for page in found], ensure_ascii=False)
        return "\n\n".join(f"<!-- page {page.page}{' failed: ' + page.error if page.error else ''} -->\n\n"
                           f"{page.text or ''}".rstrip() for page in found)

    @server.tool()
    async def list_jobs(ctx: Context, status: str | None = None, limit: int = 20) -> list[dict]:
        """The tenant's jobs, newest first: at most `limit` (1-200), only those in `status` if given
        (queued, running, succeeded, failed, canceled)."""
        limit = max(1, min(limit, 200))
        rows: list[dict[str, Any]] = []
        async with client_for(ctx) as client:
            filters = {"status": status} if status else {}
            async for job in _listing(client, filters, page_size=min(limit, 100)):
                rows.append({"job_id": job.id, "status": job.status, "filename": job.filename,
                             "pages_total": job.pages_total, "pages_done": job.pages_done,
                             "created_at": job.created_at.isoformat()})
                if len(rows) >= limit:
                    break
        return rows

    return server


async def _call(awaitable):
    """The client's answer, or its refusal as the tool's error: the API's code and sentence."""
    try:
        return await awaitable
    except OcrqError as exc:
        raise ToolRefused(f"{exc.code}: {exc.message}") from None
    except ValidationError as exc:  # the client checks options against the API's own schema before sending
        raise ToolRefused("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


async def _pages(job, format: str):
    try:
        async for page in job.pages(format):
            yield page
    except OcrqError as exc:
        raise ToolRefused(f"{exc.code}: {exc.message}") from None


async def _listing(client: AsyncClient, filters: dict, *, page_size: int):
    try:
        async for job in client.jobs.list(page_size=page_size, **filters):
            yield job
    except OcrqError as exc:
        raise ToolRefused(f"{exc.code}: {exc.message}") from None


def stdio_server(*, url: str, key: str | None) -> MCPServer:
    """The server `ocrq mcp` runs on stdio: every call to the API at `url` with `key`."""
    return build_server(lambda _ctx: AsyncClient(url, key), local_files=True)


def bearer_of(ctx: Context) -> str | None:
    """The `Authorization: Bearer` key of the MCP request over HTTP."""
    headers = ctx.headers or {}
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def http_client_for(transport: httpx.AsyncBaseTransport, base_url: str) -> ClientFor:
    """Clients on the API through `transport` (the app itself), each with the key of its MCP request."""
    @asynccontextmanager
    async def session(ctx: Context) -> AsyncIterator[AsyncClient]:
        key = bearer_of(ctx)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers, timeout=60.0) as http:
            yield AsyncClient(http=http)
    return session
