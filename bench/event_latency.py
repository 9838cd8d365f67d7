"""From a page finishing on a worker to its SSE event at a client, over N pages, on Postgres.

A fresh database migrated to head holds one running job of N pages. Two `ocrq api` processes serve its event
stream, one polling at the default interval (OCRQ_EVENTS_POLL_S 0.25) and one at 0.05; a client follows each.
This process finishes the pages one by one with the worker's own transaction (finish_page, the page's event
number, the job's counts; the last one ends the job) every --interval seconds, and notes the time of each commit.
A page's latency is its event's arrival at the client minus its commit: same host, same clock. OCR is left out
on purpose: it comes before the commit and is the same with or without events.

    nice -n 10 .venv/bin/python bench/event_latency.py --pages 200 --interval 0.1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.db import Database  # noqa: E402
from common.events import service as events  # noqa: E402
from common.jobs import states  # noqa: E402
from common.jobs.models import Job, Page, page_rows  # noqa: E402
from common.settings import Settings  # noqa: E402
from tests.conftest import fresh_database  # noqa: E402
from tests.support.api_process import ApiProcess  # noqa: E402

KEY = "ocrq_bench_events_key_00000000000000000"


def follow(url: str, arrivals: dict[int, float], ready: threading.Event) -> None:
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as response:
        ready.set()
        page = None
        for line in response.iter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                page = data.get("page")
            elif line == "" and page is not None:
                arrivals[page] = time.time()
                page = None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    with fresh_database() as url, tempfile.TemporaryDirectory(prefix="ocrq-events-") as home:
        settings = Settings(home=Path(home), database_url=url, storage_url=f"file://{home}/storage",
                            api_keys=[f"bench:{KEY}"], rate_limit_rps=0)
        db = Database(url)
        job = Job(tenant_id="bench", status="running", source_kind="upload", source_uri="upload:x",
                  pages_total=args.pages)
        with db.session() as session:
            session.add(job)
            session.flush()
            session.execute(Page.__table__.insert(), page_rows(job.id, list(range(args.pages)),
                                                               ((100, 100),) * args.pages))
            session.execute(Page.__table__.update().where(Page.job_id == job.id).values(status="running"))
        polls = {"0.25": {}, "0.05": {}}
        apis = []
        try:
            # One after the other: two API processes starting at once on a fresh database race to seed the keys.
            for poll in polls:
                apis.append(ApiProcess(settings, log=Path(home) / f"api-{poll}.log",
                                       extra_env={"OCRQ_EVENTS_POLL_S": poll}).wait_ready())
            followers = []
            for api, arrivals in zip(apis, polls.values(), strict=True):
                ready = threading.Event()
                thread = threading.Thread(target=follow, args=(f"{api.url}/jobs/{job.id}/events", arrivals, ready))
                thread.start()
                ready.wait(30)
                followers.append(thread)
            committed = {}
            for index in range(args.pages):
                page_id = page_rows(job.id, [index], ((0, 0),) * (index + 1))[0]["id"]
                with db.session() as session:
                    states.finish_page(session, page_id=page_id, outcome=states.PageOutcome(text=f"page {index + 1}"))
                    events.page_ended(session, job_id=job.id, page_id=page_id)
                    states.refresh_counts(session, job_id=job.id)
                    if index == args.pages - 1:
                        states.complete_job_if_done(session, job_id=job.id)
                committed[index + 1] = time.time()
                time.sleep(args.interval)
            for thread in followers:
                thread.join(60)
        finally:
            for api in apis:
                api.stop()
    print(f"{args.pages} pages, one every {args.interval} s, Postgres, 2 API processes")
    for poll, arrivals in polls.items():
        latency = [(arrivals[p] - committed[p]) * 1000 for p in committed if p in arrivals]
        print(f"OCRQ_EVENTS_POLL_S={poll}: {len(latency)}/{len(committed)} events, "
              f"median {statistics.median(latency):.0f} ms, p95 {percentile(latency, 0.95):.0f} ms, "
              f"max {max(latency):.0f} ms")


if __name__ == "__main__":
    main()
