"""`ocrq jobs`, `ocrq watch` and `ocrq erase`: what a tenant has sent, one job live, and erasing one."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.submit import EtaColumn
from common.jobs.schemas import JobList
from ocrq.client import Client


def jobs_table(listing: JobList) -> Table:
    table = Table(box=None, header_style="bold")
    table.add_column("id", no_wrap=True, min_width=32)  # whole, to be copied into `ocrq watch` or `ocrq erase`
    for name in ("status", "pages", "file", "created"):
        table.add_column(name)
    for job in listing.jobs:
        pages = f"{job.pages_done}/{job.pages_total}" + (f" ({job.pages_failed} failed)" if job.pages_failed else "")
        status = job.status + (" (erased)" if job.erased_at else "")
        table.add_row(job.id, status, pages, job.filename or "", f"{job.created_at:%Y-%m-%d %H:%M:%S}")
    return table


def watch(client: Client, job_id: str, console: Console) -> str:
    """Follow the job's events with a bar of pages done; returns its final status."""
    job = client.job(job_id)
    view = job.get()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("pages"),
               TimeElapsedColumn(), EtaColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(view.filename or job_id, total=view.pages_total or None, completed=view.pages_done)
        status = view.status
        for event in job.events():
            data = event.data
            if event.type.startswith("page."):
                progress.advance(bar)
                if event.type == "page.failed":
                    progress.console.print(f"page {data['page']} failed: {data['error']}")
            else:
                status = data["status"]
                progress.update(bar, completed=data["pages_done"], total=data["pages_total"] or None)
    return status
