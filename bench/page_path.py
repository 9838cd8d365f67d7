"""Database work of the page path: Postgres commits and row writes per page, counted by Postgres itself.

Starts a fresh database, SeaweedFS and one worker (no beat, so no sweeps), like the tests, and waits on the\nworker's log rather than polling the API. The idle rate
(the worker's heartbeats) is measured first and taken off. Then (1) N one-page upload jobs and (2) one
P-page PDF job run through the real stack; pg_stat_database gives the commits and rows written for each.

    .venv/bin/python bench/page_path.py --jobs 16 --pdf-pages 16

It uses only the test suite's helpers, so the same file runs in an older checkout for a side-by-side figure.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.batches.support import word_image  # noqa: E402
from tests.conftest import BUCKET, KEY_A, fresh_database, make_settings  # noqa: E402
from tests.support import seaweed  # noqa: E402
from tests.support.stack import Stack, wait_for_job  # noqa: E402


def counters(url: str) -> dict[str, int]:
    """This database's commits and written rows, as the statistics collector has them."""
    time.sleep(1.5)  # backends report their statistics at most once a second
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
                           "WHERE datname = %s", (name,)).fetchone()
    return {"commits": row[0], "writes": row[1] + row[2] + row[3]}


def wait_finished(stack: Stack, count: int, timeout: float = 600) -> None:
    """Wait on the worker's log, not the API: polling would add read transactions of its own."""
    deadline = time.monotonic() + timeout
    while stack.workers[0].log.read_bytes().count(b"job finished") < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} jobs finished in {timeout} s")
        time.sleep(0.5)


def delta(before: dict, after: dict, idle: dict, seconds: float) -> dict[str, float]:
    return {k: after[k] - before[k] - idle[k] * seconds for k in before}


def pdf_of(pages: int) -> bytes:
    images = [Image.open(io.BytesIO(word_image(f"page{n}"))).convert("RGB") for n in range(pages)]
    buffer = io.BytesIO()
    images[0].save(buffer, "PDF", save_all=True, append_images=images[1:], resolution=72)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--pdf-pages", type=int, default=16)
    parser.add_argument("--idle-s", type=float, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, fresh_database() as pg_url:
        s3 = seaweed.start(Path(tmp) / "seaweed")
        try:
            s3.client().create_bucket(Bucket=BUCKET)
            settings = make_settings(home=Path(tmp) / "home", pg_url=pg_url,
                                     redis_url="redis://127.0.0.1:6379/0", s3=s3)
            (Path(tmp) / "logs").mkdir()
            with Stack(settings, logs=Path(tmp) / "logs") as stack:
                stack.start_worker()
                client = stack.client(KEY_A)
                client.post("/jobs", files={"file": ("w.png", word_image("warm"))})
                wait_finished(stack, 1)
                start = counters(pg_url)
                time.sleep(args.idle_s)
                idle_end = counters(pg_url)
                idle_s = args.idle_s + 1.5
                idle = {k: (idle_end[k] - start[k]) / idle_s for k in start}

                before, t0 = counters(pg_url), time.monotonic()
                ids = [client.post("/jobs", files={"file": (f"j{n}.png", word_image(f"job{n}"))}).json()["id"]
                       for n in range(args.jobs)]
                wait_finished(stack, 1 + args.jobs)
                after = counters(pg_url)
                assert all(wait_for_job(client, job_id)["status"] == "succeeded" for job_id in ids)
                jobs = delta(before, after, idle, time.monotonic() - t0)

                before, t0 = counters(pg_url), time.monotonic()
                job_id = client.post("/jobs", files={"file": ("doc.pdf", pdf_of(args.pdf_pages))}).json()["id"]
                wait_finished(stack, 2 + args.jobs)
                after = counters(pg_url)
                assert wait_for_job(client, job_id)["status"] == "succeeded"
                pdf = delta(before, after, idle, time.monotonic() - t0)
        finally:
            s3.stop()
    result = {
        "tree": str(ROOT), "idle_per_s": idle,
        "one_page_jobs": {"jobs": args.jobs, **{f"{k}_per_job": v / args.jobs for k, v in jobs.items()}},
        "pdf_job": {"pages": args.pdf_pages, **{f"{k}_per_page": v / args.pdf_pages for k, v in pdf.items()}},
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
