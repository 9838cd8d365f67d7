"""A small HTTP client for the CLI, with errors a person can act on."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx

from common.settings import get_settings

RATE_LIMIT_RETRIES = 10


class ClientError(Exception):
    pass


class SubmissionRejected(ClientError):
    """The server refused one document; others may still go through."""


def key_file() -> Path:
    return get_settings().home / "api_key"


def default_key() -> str | None:
    if key := os.environ.get("OCRQ_API_KEY"):
        return key
    path = key_file()
    return path.read_text().strip() if path.exists() else None


class Client:
    def __init__(self, *, url: str, key: str | None, timeout: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = url.rstrip("/")
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


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:200]
