"""Which ocrq the CLI talks to and with which key, and how a refusal reads; requests go through ocrq.client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from pydantic import ValidationError

from common.settings import get_settings
from ocrq.client import Client, OcrqError, Retry

FALLBACK_URL = "http://127.0.0.1:8000"
# The client's own settings, read here and by ocrq.client: which server the CLI talks to and with which key. They
# are not the service's (common.settings), which the CLI reads only for OCRQ_HOME, where `ocrq serve` left both.
URL_ENV = "OCRQ_URL"
KEY_ENV = "OCRQ_API_KEY"
# The tenant's rate limit is waited out (10 tries, at most 30 s each); a server that cannot be reached, or does not
# answer in time, is said after 3 tries, not after the library's longer back-off.
CLI_RETRY = Retry(attempts=10, max_wait_s=30.0, connect_attempts=3)


class CliError(Exception):
    """A sentence of the CLI's own for the person at the terminal (exit status 2)."""


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


def connect(url: str | None = None, key: str | None = None, *, timeout: float = 60.0) -> Client:
    """An ocrq.client.Client on --url and --key, else on the defaults above."""
    return Client((url or default_url()).rstrip("/"), key or default_key(), timeout=timeout, retry=CLI_RETRY)


def explain(exc: OcrqError, *, url: str, about: str | None = None) -> str:
    """The refusal as the sentence the CLI prints: what to do where there was no answer or the key was refused,
    else the API's status, code and sentence."""
    if exc.code == "unreachable":
        return f"cannot reach ocrq at {url}: is `ocrq serve` (or `ocrq api`) running?"
    if exc.code == "timeout":
        return f"ocrq at {url} did not answer in time"
    if exc.status == 401:
        return "the API key was refused: pass --key or set OCRQ_API_KEY (see `ocrq keys create`)"
    return f"{about}: {exc}" if about else str(exc)


def invalid(exc: ValidationError) -> str:
    """An option the client refused before sending, as the API words the same refusal."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


@contextmanager
def reported(client: Client, about: str | None = None) -> Iterator[None]:
    """Print a refusal as `error: ...` and exit 2, never a traceback."""
    try:
        yield
    except OcrqError as exc:
        typer.echo(f"error: {explain(exc, url=client.url, about=about)}", err=True)
        raise typer.Exit(2) from exc
    except ValidationError as exc:
        typer.echo(f"error: {invalid(exc)}", err=True)
        raise typer.Exit(2) from exc
    except CliError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
