"""`ocrq ingest`: start a batch over an S3 prefix and, with --wait, follow it with a progress bar."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from common.batches.schemas import BatchView
from ocrq.client import Client

TERMINAL = {"completed", "failed", "canceled"}
ENDED = ("succeeded", "failed", "canceled", "skipped", "skipped_existing")


def run(client: Client, *, body: dict, wait: bool, console: Console | None = None, interval: float = 1.0) -> bool:
    """Start the batch; with wait, follow it to the end. True when nothing failed."""
    console = console or Console(stderr=True)
    options = {k: v for k, v in body.items() if v is not None}
    accepted = client.batches.create(options.pop("input_prefix"), options.pop("output_prefix"), **options)
    print(accepted.id, flush=True)
    if not wait:
        return True
    state = follow(client, accepted.id, console, interval=interval)
    console.print(
        f"{state.status}: {state.succeeded} succeeded, {state.failed} failed, {state.canceled} canceled, "
        f"{state.skipped} skipped, {state.skipped_existing} already done, of {state.listed} listed; "
        f"{state.pages.done} pages"
    )
    if state.error:
        console.print(f"[red]{state.error}[/red]")
    if state.manifest:
        console.print(f"manifest: {state.manifest}")
    return state.status == "completed" and state.failed == 0


def follow(client: Client, batch_id: str, console: Console, *, interval: float) -> BatchView:
    """Poll until the batch has finished, with a bar of objects done out of those listed so far."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("objects"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("listing", total=None)
        while True:
            state = client.batches.get(batch_id)
            progress.update(bar, completed=sum(getattr(state, name) for name in ENDED), total=state.listed or None,
                            description=state.status + ("" if state.listing_done else " (listing)"))
            if state.status in TERMINAL and state.finished_at:
                return state
            time.sleep(interval)
