"""`ocrq jobs`, `ocrq watch` and `ocrq erase`: what a tenant has sent, one job live, and erasing one."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.client import Client
from cli.submit import EtaColumn


def jobs_table(listing: dict) -> Table:
    table = Table(box=None, header_style="bold")
    table.add_column("id", no_wrap=True, min_width=32)  # whole, to be copied into `ocrq watch` or `ocrq erase`
    for name in ("status", "pages", "file", "created"):
        table.add_column(name)
    for job in listing["jobs"]:
        pages = f"{job['pages_done']}/{job['pages_total']}" + (f" ({job['pages_failed']} failed)"
                                                              if job["pages_failed"] else "")
        status = job["status"] + (" (erased)" if job.get("erased_at") else "")
        table.add_row(job["id"], status, pages, job["filename"] or "", job["created_at"][:19].replace("T", " "))
    return table


def watch(client: Client, job_id: str, console: Console) -> str:
    """Follow the job's events with a bar of pages done; returns its final status."""
    job = client.job(job_id)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("pages"),
               TimeElapsedColumn(), EtaColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(job["filename"] or job_id, total=job["pages_total"] or None,
                                completed=job["pages_done"])
        status = job["status"]
        for kind, data in client.events(job_id):
            if kind.startswith("page."):
                progress.advance(bar)
                if kind == "page.failed":
                    progress.console.print(f"page {data['page']} failed: {data['error']}")
            else:
                status = data["status"]
                progress.update(bar, completed=data["pages_done"], total=data["pages_total"] or None)
    return status
