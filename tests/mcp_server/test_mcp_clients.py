"""`ocrq mcp` (stdio) and /mcp beside the API (streamable HTTP), driven by the mcp SDK's own Client on the real
stack: submit (path, URL, base64), wait, result with a page range, list_jobs; the key from OCRQ_API_KEY or the
request's Authorization header; another tenant's job and a server-side path are refused."""

from __future__ import annotations

import asyncio
import base64
import json
import sys

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import KEY_A, KEY_B
from tests.formats.pages import one_column
from tests.support.stack import ROOT

TOOLS = {"submit", "wait", "result", "list_jobs"}


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "survey.png"
    one_column().save(path, "PNG")
    return path


def over_http(api_url: str, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(streamable_http_client(f"{api_url}/mcp", http_client=httpx2.AsyncClient(headers=headers,
                                                                                          timeout=120)))


def over_stdio(api_url: str, key: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "cli.main", "mcp", "--url", api_url],
                                        env={"OCRQ_API_KEY": key, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT)))


async def call(client: Client, tool: str, **arguments):
    """The tool's answer: its structured content (or its text), or the error's text as RuntimeError."""
    answer = await client.call_tool(tool, arguments)
    text = "".join(getattr(part, "text", "") for part in answer.content)
    if answer.is_error:
        raise RuntimeError(text)
    structured = answer.structured_content
    if structured is not None:
        return structured.get("result", structured) if set(structured) == {"result"} else structured
    if tool in ("submit", "wait", "list_jobs"):
        return json.loads(text)
    return text


async def read_a_page(client: Client, **source):
    tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == TOOLS
    job = await call(client, "submit", **source)
    done = await call(client, "wait", job_id=job["job_id"], timeout_s=120)
    assert done["status"] == "succeeded", done
    return job["job_id"], await call(client, "result", job_id=job["job_id"])


def test_stdio_server_reads_a_local_path_with_the_key_from_the_environment(api_url, page_file):
    async def main():
        async with over_stdio(api_url, KEY_A) as client:
            job_id, markdown = await read_a_page(client, path=str(page_file))
            listed = await call(client, "list_jobs", status="succeeded", limit=200)
            return job_id, markdown, listed

    job_id, markdown, listed = asyncio.run(main())
    assert "granite" in markdown and "<!-- page 1 -->" in markdown
    assert job_id in [row["job_id"] for row in listed]


def test_http_server_takes_base64_with_the_key_from_the_header(api_url, page_file):
    async def main():
        async with over_http(api_url, KEY_A) as client:
            encoded = base64.b64encode(page_file.read_bytes()).decode()
            job_id, markdown = await read_a_page(client, base64_data=encoded, filename="survey.png")
            as_json = json.loads(await call(client, "result", job_id=job_id, format="json"))
            none = await call(client, "result", job_id=job_id, first_page=2)
            return markdown, as_json, none

    markdown, as_json, none = asyncio.run(main())
    assert "granite" in markdown
    assert [page["page"] for page in as_json] == [1] and as_json[0]["blocks"]
    assert none == ""


def test_a_page_range_of_a_pdf(api_url, samples):
    async def main():
        async with over_http(api_url, KEY_A) as client:
            encoded = base64.b64encode((samples / "three-pages.pdf").read_bytes()).decode()
            job = await call(client, "submit", base64_data=encoded, filename="three-pages.pdf")
            await call(client, "wait", job_id=job["job_id"], timeout_s=120)
            return await call(client, "result", job_id=job["job_id"], format="text", first_page=2, last_page=2)

    text = asyncio.run(main())
    assert "LinnSequencer" in text and "<!-- page 2 -->" in text and "<!-- page 1 -->" not in text


def test_over_http_a_path_is_refused_and_urls_go_through_the_ssrf_guard(api_url):
    async def main():
        async with over_http(api_url, KEY_A) as client:
            refusals = []
            for source in ({"path": "/etc/passwd"}, {"url": "http://169.254.169.254/latest/meta-data/"},
                           {"url": "http://[::1]:6379/"}, {"url": "file:///etc/passwd"},
                           {"url": "https://example.com/a.png", "priority": "urgent"}):
                with pytest.raises(RuntimeError) as refused:
                    await call(client, "submit", **source)
                refusals.append(str(refused.value))
            return refusals

    path, metadata, loopback, scheme, priority = asyncio.run(main())
    assert "path is read by `ocrq mcp` on your own machine" in path and "root:" not in path
    assert "url_refused" in metadata and "url_refused" in loopback and "http:// or https://" in scheme
    assert "priority: Input should be 'interactive' or 'bulk'" in priority


def test_another_tenants_job_is_not_found_and_a_missing_key_is_401(api_url, page_file):
    async def main():
        async with over_http(api_url, KEY_A) as owner:
            encoded = base64.b64encode(page_file.read_bytes()).decode()
            job = await call(owner, "submit", base64_data=encoded, filename="mine.png")
        async with over_http(api_url, KEY_B) as stranger:
            refusals = []
            for tool, arguments in (("wait", {"timeout_s": 1}), ("result", {})):
                with pytest.raises(RuntimeError) as refused:
                    await call(stranger, tool, job_id=job["job_id"], **arguments)
                refusals.append(str(refused.value))
            listed = await call(stranger, "list_jobs", limit=200)
        return job["job_id"], refusals, listed

    job_id, refusals, listed = asyncio.run(main())
    assert all(": not_found: no such resource" in r for r in refusals), refusals
    assert job_id not in [row["job_id"] for row in listed]
    for headers in ({}, {"Authorization": "Basic abc"}):
        answer = httpx2.post(f"{api_url}/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert answer.status_code == 401 and answer.json()["code"] == "unauthorized"


def test_a_wrong_key_over_http_is_refused_by_the_api(api_url):
    async def main():
        async with over_http(api_url, "ocrq_not_a_key") as client:
            with pytest.raises(RuntimeError) as refused:
                await call(client, "list_jobs")
            return str(refused.value)

    assert asyncio.run(main()) == "Error executing tool list_jobs: unauthorized: invalid or revoked API key"
