"""A small HTTP client for the CLI, with errors a person can act on."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from common.settings import get_settings

RATE_LIMIT_RETRIES = 10
FALLBACK_URL = "http://127.0.0.1:8000"
# The client's own settings, read here and nowhere else: which server the CLI talks to and with which key. They
# are not the service's (common.settings), which the CLI reads only for OCRQ_HOME, where `ocrq serve` left both.
URL_ENV = "OCRQ_URL"
KEY_ENV = "OCRQ_API_KEY"


class ClientError(Exception):
    pass


class SubmissionRejected(ClientError):
    """The server refused one document; others may still go through."""


def key_file() -> Path:
    return get_settings().home / "api_key"


def url_file() -> Path:
    """Where `ocrq serve` records the URL it serves on, for the CLI."""
    return get_settings().home / "url"


def default_url() -> str:
    """OCRQ_URL, else the URL the last `ocrq serve` of this OCRQ_HOME recorded, else port 8000 on loopback."""
    if url := os.environ.get(URL_ENV):
        return url
    path = url_file()
    return (path.read_text().strip() if path.exists() else "") or FALLBACK_URL


def default_key() -> str | None:
    if key := os.environ.get(KEY_ENV):
        return key
    path = key_file()
    return path.read_text().strip() if path.exists() else None


class Client:
    def __init__(self, *, url: str | None = None, key: str | None = None, timeout: float = 60.0) -> None:
        key = key or default_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = (url or default_url()).rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        for _ in range(RATE_LIMIT_RETRIES):
            response = self._send(method, path, **kwargs)
            if response.status_code != 429:
                break
            # Over the tenant's requests per second: wait as told, then send again (httpx rewinds file parts).
            time.sleep(min(float(response.headers.get("retry-after", "1")), 30.0))
        if response.status_code == 401:
            raise ClientError("the API key was refused: pass --key or set OCRQ_API_KEY (see `ocrq keys create`)")
        return response

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            return self.http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise ClientError(f"cannot reach ocrq at {self.url}: is `ocrq serve` (or `ocrq api`) running?") from exc
        except httpx.TimeoutException as exc:
            raise ClientError(f"ocrq at {self.url} did not answer in time") from exc

    def submit(self, path: Path, *, options: dict) -> dict:
        with path.open("rb") as body:
            data = {k: v for k, v in options.items() if v is not None}
            response = self.request("POST", "/jobs", files={"file": (path.name, body)}, data=data)
        if response.status_code != 202:
            raise SubmissionRejected(f"{path}: {response.status_code} {_detail(response)}")
        return response.json()

    def job(self, job_id: str) -> dict:
        response = self.request("GET", f"/jobs/{job_id}")
        if response.status_code != 200:
            raise ClientError(f"{job_id}: {response.status_code} {_detail(response)}")
        return response.json()

    def result(self, job_id: str, fmt: str | None = None) -> str:
        return self.result_bytes(job_id, fmt).decode()

    def result_bytes(self, job_id: str, fmt: str | None = None) -> bytes:
        params = {"format": fmt} if fmt else {}
        response = self.request("GET", f"/jobs/{job_id}/result", params=params, follow_redirects=True)
        if response.status_code != 200:
            raise ClientError(f"{job_id}: {response.status_code} {_detail(response)}")
        return response.content


    def jobs(self, *, status: list[str] | None = None, limit: int = 20) -> dict:
        response = self.request("GET", "/jobs", params={"status": status or [], "limit": limit})
        if response.status_code != 200:
            raise ClientError(f"listing jobs: {response.status_code} {_detail(response)}")
        return response.json()

    def erase(self, job_id: str) -> bool:
        """True once erased; False while the server waits for its storage to finish it."""
        response = self.request("POST", f"/jobs/{job_id}/erase")
        if response.status_code not in (200, 202):
            raise ClientError(f"{job_id}: {response.status_code} {_detail(response)}")
        return response.status_code == 200

    def events(self, job_id: str) -> Iterator[tuple[str, dict]]:
        """The job's live events as (type, data), reconnecting with Last-Event-ID if the stream drops."""
        last: str | None = None
        while True:
            headers = {"Last-Event-ID": last} if last else {}
            try:
                with self.http.stream("GET", f"/jobs/{job_id}/events", headers=headers, timeout=None) as response:
                    if response.status_code != 200:
                        response.read()
                        raise ClientError(f"{job_id}: {response.status_code} {_detail(response)}")
                    fields: dict[str, str] = {}
                    for line in response.iter_lines():
                        if line:
                            name, _, value = line.partition(":")
                            fields[name] = value.removeprefix(" ")
                            continue
                        if "event" in fields:
                            last = fields.get("id", last)
                            yield fields["event"], json.loads(fields.get("data") or "{}")
                            if fields["event"].startswith("job."):
                                return
                        fields = {}
                return
            except httpx.ConnectError as exc:
                raise ClientError(f"cannot reach ocrq at {self.url}: is `ocrq serve` (or `ocrq api`) running?") from exc
            except (httpx.ReadError, httpx.RemoteProtocolError):
                time.sleep(1)  # the stream dropped: resume after the last event seen


def _detail(response: httpx.Response) -> str:
    """The server's explanation as a sentence, also for FastAPI's list of validation errors."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:200]
    if isinstance(detail, list):
        return "; ".join(_validation_message(item) for item in detail) or "invalid request"
    return str(detail)


def _validation_message(item) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = [str(part) for part in item.get("loc", []) if part not in ("query", "body", "path", "header")]
    return f"{'.'.join(where)}: {item.get('msg', 'invalid')}" if where else str(item.get("msg", "invalid"))
