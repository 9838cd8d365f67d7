"""`ocrq submit`: send files, follow their progress, and write or print the results."""

from __future__ import annotations

import glob
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from cli.connect import CliError, explain
from common.jobs.schemas import JobView
from ocrq.client import TERMINAL, Client, OcrqError

# As common.jobs.results names them; the CLI does not import the service's models to start.
EXTENSIONS = {"markdown": "md", "text": "txt", "json": "json", "pdf": "pdf", "hocr": "hocr", "alto": "alto.xml",
              "page": "page.zip", "csv": "csv", "xlsx": "xlsx"}
BINARY = ("pdf", "page", "csv", "xlsx")


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
                raise CliError(f"no such file: {item}")
            found += [m for m in matches if m.is_file()]
    return found


def run(client: Client, *, files: list[Path], wait: bool, out: Path | None, options: dict) -> bool:
    """Submit every file; True when every job was accepted (and, with wait, succeeded)."""
    console = Console(stderr=True)
    jobs: dict[str, Path] = {}
    rejected: list[Path] = []
    for path in expand(files):
        try:
            jobs[client.submit(path, **options).id] = path
        except OcrqError as exc:
            if exc.unreachable or exc.status == 401:  # the same for every file: said once, by the caller
                raise
            console.print(f"[red]rejected[/red] {explain(exc, url=client.url, about=str(path))}", markup=True,
                          highlight=False)
            rejected.append(path)
    if not wait:
        for job_id, path in jobs.items():
            print(f"{job_id}\t{path}")
        return not rejected
    states = follow(client, jobs, console) if jobs else {}
    fmt = options.get("output") or "markdown"
    written: list[Path] = []
    not_read: list[Path] = []
    for job_id, path in jobs.items():
        state = states[job_id]
        if state.status != "succeeded":
            console.print(f"[red]{state.status}[/red] {path}: {state.error or ''}", highlight=False)
            not_read.append(path)
            continue
        for err in state.page_errors:
            console.print(f"[yellow]page {err.page} of {path} failed:[/yellow] {err.error}", highlight=False)
        body = client.job(job_id).content(fmt)
        if out:
            out.mkdir(parents=True, exist_ok=True)
            zipped = fmt == "csv" and body[:2] == b"PK"  # not one table: a zip of one CSV each (CSV text never starts so)
            target = out / f"{path.name}.{EXTENSIONS[fmt]}{'.zip' if zipped else ''}"
            target.write_bytes(body)
            written.append(target)
        elif fmt in BINARY:
            console.print(f"{job_id}\t{path}: a {fmt} result is written only with --out DIR", highlight=False)
        else:
            sys.stdout.write(body.decode())
    if out:
        console.print(summary(out=out, written=written, not_read=not_read, rejected=rejected), highlight=False)
    return not rejected and not not_read


def summary(*, out: Path, written: list[Path], not_read: list[Path], rejected: list[Path]) -> str:
    """What `--out` wrote and what it could not, one line each."""
    total = len(written) + len(not_read) + len(rejected)
    lines = [f"wrote {len(written)} of {total} result(s) to {out}/"]
    lines += [f"  {path.name}" for path in written]
    if not_read:
        lines.append(f"not read ({len(not_read)}): " + ", ".join(str(p) for p in not_read))
    if rejected:
        lines.append(f"rejected ({len(rejected)}): " + ", ".join(str(p) for p in rejected))
    return "\n".join(lines)


def eta_seconds(*, elapsed: float | None, done: float, total: float | None) -> float | None:
    """Time left at the average pace so far: pages arrive a few at a time, too seldom for a moving rate."""
    if not elapsed or not total or done <= 0:
        return None
    return max(elapsed * (total - done) / done, 0.0)


class EtaColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        left = eta_seconds(elapsed=task.elapsed, done=task.completed, total=task.total)
        if left is None:
            return Text("ETA …" if not task.finished else "", style="progress.remaining")
        minutes, seconds = divmod(round(left), 60)
        return Text(f"ETA {minutes}:{seconds:02d}", style="progress.remaining")


def follow(client: Client, jobs: dict[str, Path], console: Console, *,
           interval: float = 0.5) -> dict[str, JobView]:
    """Poll until every job has finished, with a bar of pages done, rate and ETA."""
    states: dict[str, JobView] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("pages"),
               TimeElapsedColumn(), EtaColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"{len(jobs)} job(s)", total=None)
        while True:
            for job_id in jobs:
                if job_id not in states or states[job_id].status not in TERMINAL:
                    states[job_id] = client.job(job_id).get()
            total = sum(s.pages_total for s in states.values())
            progress.update(bar, completed=sum(s.pages_done for s in states.values()), total=total or None)
            if all(s.status in TERMINAL for s in states.values()):
                return states
            time.sleep(interval)
