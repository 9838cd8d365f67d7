"""`ocrq bench`: submit N copies of a sample to a running server and report pages per second."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cli.connect import CliError
from common.jobs.schemas import JobView
from ocrq.client import TERMINAL, Client


@dataclass(frozen=True)
class BenchReport:
    jobs: int
    pages: int
    pages_failed: int
    jobs_failed: int
    seconds: float

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return asdict(self) | {"pages_per_s": round(self.pages_per_s, 3)}

    def summary(self) -> str:
        failed = f", {self.pages_failed} page(s) failed" if self.pages_failed else ""
        return (f"{self.jobs} job(s), {self.pages} page(s) read in {self.seconds:.1f} s: "
                f"{self.pages_per_s:.2f} pages/s{failed}")


def run(client: Client, *, sample: Path, copies: int, options: dict, interval: float = 0.5,
        timeout: float = 3600.0) -> BenchReport:
    """Submit every copy, then poll until all have finished; the clock runs from first submit to last finish."""
    started = time.monotonic()
    job_ids = [client.submit(sample, **options).id for _ in range(copies)]
    states = _wait(client, job_ids, interval=interval, deadline=started + timeout)
    seconds = time.monotonic() - started
    done = sum(s.pages_done for s in states.values())
    failed = sum(s.pages_failed for s in states.values())
    return BenchReport(jobs=copies, pages=done - failed, pages_failed=failed, seconds=seconds,
                       jobs_failed=sum(s.status != "succeeded" for s in states.values()))


def _wait(client: Client, job_ids: list[str], *, interval: float, deadline: float) -> dict[str, JobView]:
    states: dict[str, JobView] = {}
    pending = list(job_ids)
    while pending:
        if time.monotonic() > deadline:
            raise CliError(f"{len(pending)} job(s) still unfinished at the time limit")
        still = []
        for job_id in pending:
            states[job_id] = client.job(job_id).get()  # the client waits out the tenant's rate limit itself
            if states[job_id].status not in TERMINAL:
                still.append(job_id)
        pending = still
        if pending:
            time.sleep(interval)
    return states
