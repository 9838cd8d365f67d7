"""`ocrq ingest`: start a batch over an S3 prefix and, with --wait, follow it with a progress bar."""

from __future__ import annotations

import time

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from cli.client import Client, ClientError

TERMINAL = {"completed", "failed", "canceled"}
ENDED = ("succeeded", "failed", "canceled", "skipped", "skipped_existing")


def start(client: Client, *, body: dict) -> dict:
    """POST /batches; the accepted batch, or ClientError with the service's reason."""
    response = client.request("POST", "/batches", json={k: v for k, v in body.items() if v is not None})
    if response.status_code != 202:
        raise ClientError(f"{response.status_code} {detail(response)}")
    return response.json()


def batch(client: Client, batch_id: str) -> dict:
    response = client.request("GET", f"/batches/{batch_id}")
    if response.status_code != 200:
        raise ClientError(f"{batch_id}: {response.status_code} {detail(response)}")
    return response.json()


def run(client: Client, *, body: dict, wait: bool, console: Console | None = None, interval: float = 1.0) -> bool:
    """Start the batch; with wait, follow it to the end. True when nothing failed."""
    console = console or Console(stderr=True)
    accepted = start(client, body=body)
    print(accepted["id"], flush=True)
    if not wait:
        return True
    state = follow(client, accepted["id"], console, interval=interval)
    console.print(
        f"{state['status']}: {state['succeeded']} succeeded, {state['failed']} failed, {state['canceled']} canceled, "
        f"{state['skipped']} skipped, {state['skipped_existing']} already done, of {state['listed']} listed; "
        f"{state['pages']['done']} pages"
    )
    if state["error"]:
        console.print(f"[red]{state['error']}[/red]")
    if state["manifest"]:
        console.print(f"manifest: {state['manifest']}")
    return state["status"] == "completed" and state["failed"] == 0


def follow(client: Client, batch_id: str, console: Console, *, interval: float) -> dict:
    """Poll until the batch has finished, with a bar of objects done out of those listed so far."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("objects"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("listing", total=None)
        while True:
            state = batch(client, batch_id)
            listed = state["listed"]
            progress.update(bar, completed=sum(state[name] for name in ENDED), total=listed or None,
                            description=state["status"] + ("" if state["listing_done"] else " (listing)"))
            if state["status"] in TERMINAL and state["finished_at"]:
                return state
            time.sleep(interval)


def detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:200]
