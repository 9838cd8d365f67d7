"""`ocrq submit`: send files, follow their progress, and write or print the results."""

from __future__ import annotations

import glob
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from cli.client import Client, ClientError, SubmissionRejected

TERMINAL = {"succeeded", "failed", "canceled"}
EXTENSIONS = {"markdown": "md", "text": "txt", "json": "json", "pdf": "pdf"}


def expand(items: list[Path]) -> list[Path]:
    """Files as given, folders walked recursively, globs expanded; hidden files skipped."""
    found: list[Path] = []
    for item in items:
        if item.is_dir():
            found += sorted(p for p in item.rglob("*") if p.is_file() and not p.name.startswith("."))
        elif item.exists():
            found.append(item)
        else:
            matches = sorted(Path(m) for m in glob.glob(str(item), recursive=True))
            if not matches:
                raise ClientError(f"no such file: {item}")
            found += [m for m in matches if m.is_file()]
    return found


def run(client: Client, *, files: list[Path], wait: bool, out: Path | None, options: dict) -> bool:
    """Submit every file; True when every job was accepted (and, with wait, succeeded)."""
    console = Console(stderr=True)
    jobs: dict[str, Path] = {}
    accepted = True
    for path in expand(files):
        try:
            jobs[client.submit(path, options=options)["id"]] = path
        except SubmissionRejected as exc:
            console.print(f"[red]rejected[/red] {exc}")
            accepted = False
    if not wait:
        for job_id, path in jobs.items():
            print(f"{job_id}\t{path}")
        return accepted
    states = follow(client, jobs, console)
    fmt = options.get("output") or "markdown"
    for job_id, path in jobs.items():
        state = states[job_id]
        if state["status"] != "succeeded":
            console.print(f"[red]{state['status']}[/red] {path}: {state.get('error') or ''}")
            continue
        for err in state.get("page_errors", []):
            console.print(f"[yellow]page {err['page']} of {path} failed:[/yellow] {err['error']}")
        body = client.result_bytes(job_id, fmt)
        if out:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{path.name}.{EXTENSIONS[fmt]}").write_bytes(body)
        elif fmt == "pdf":
            console.print(f"{job_id}\t{path}: a PDF result is written only with --out DIR")
        else:
            sys.stdout.write(body.decode())
    return accepted and all(s["status"] == "succeeded" for s in states.values())


def follow(client: Client, jobs: dict[str, Path], console: Console, *, interval: float = 0.5) -> dict[str, dict]:
    """Poll until every job has finished, with a bar of pages done, rate and ETA."""
    states: dict[str, dict] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("pages"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"{len(jobs)} job(s)", total=None)
        while True:
            for job_id in jobs:
                if states.get(job_id, {}).get("status") not in TERMINAL:
                    states[job_id] = client.job(job_id)
            total = sum(s["pages_total"] for s in states.values())
            progress.update(bar, completed=sum(s["pages_done"] for s in states.values()), total=total or None)
            if all(s["status"] in TERMINAL for s in states.values()):
                return states
            time.sleep(interval)
