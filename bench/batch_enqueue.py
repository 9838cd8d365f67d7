"""Time from POST /batches to every job enqueued, for a prefix of N tiny objects, and the listing worker's memory.

Usage: .venv/bin/python -m bench.batch_enqueue [--objects 10000] [--page-size 1000]

Brings its own SeaweedFS (loopback), a scratch Postgres database and a Redis key prefix, uploads the objects
concurrently, starts one real `ocrq worker` on the listing queue only (so the prepare tasks pile up in the
broker instead of running), then POSTs the batch through the real API app and watches the database and the
broker until all N jobs exist and all N prepare tasks wait in the control queue. The worker's resident memory
is sampled every 20 ms, per process, throughout. Prints a markdown summary and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from common import migrate
from common.batches.models import Batch
from common.db import Database
from common.jobs.models import Job
from common.queue.names import CONTROL_QUEUE, LISTING_QUEUE
from common.settings import Settings
from tests.support import seaweed
from tests.support.stack import ROOT, settings_env

KEY = "ocrq_bench_batch_key_000000000000000000"


def tiny_png() -> bytes:
    """A valid 1x1 white PNG (67 bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (FileNotFoundError, StopIteration, ProcessLookupError):
        return 0


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as found:
            return [int(p) for p in found.read().split()]
    except FileNotFoundError:
        return []


class MemorySampler(threading.Thread):
    """RSS of the worker's main process and of its pool children, every `every` seconds."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int, int]] = []  # (time, main KiB, children KiB)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), rss_kib(self.pid), sum(rss_kib(c) for c in children(self.pid))))
            time.sleep(self.every)


def start_listing_worker(settings: Settings, log: Path) -> subprocess.Popen:
    env = os.environ.copy() | settings_env(settings)
    process = subprocess.Popen([sys.executable, "-m", "cli.main", "worker", "--queues", LISTING_QUEUE], cwd=ROOT,
                               env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while b" ready." not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--upload-threads", type=int, default=32)
    parser.add_argument("--pg-admin",
                        default=os.environ.get("OCRQ_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--redis", default=os.environ.get("OCRQ_TEST_REDIS", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ocrq-bench-batch-"))
    server = seaweed.start(work / "seaweed")
    db_name = f"ocrq_bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg.connect(args.pg_admin, autocommit=True)
    admin.execute(f'CREATE DATABASE "{db_name}"')
    prefix = f"bench{uuid.uuid4().hex[:8]}:"
    worker = None
    try:
        pg_url = args.pg_admin.rsplit("/", 1)[0] + f"/{db_name}"
        migrate.upgrade(pg_url)
        settings = Settings(
            home=work / "home", database_url=pg_url, broker_url=args.redis, broker_key_prefix=prefix,
            storage_url="s3://bench-storage", s3_endpoint_url=server.endpoint, s3_access_key_id=seaweed.ACCESS_KEY,
            s3_secret_access_key=seaweed.SECRET_KEY, api_keys=[f"bench:{KEY}"], batch_list_page_size=args.page_size,
        )
        s3 = server.client()
        for bucket in ("bench-storage", "bench-in", "bench-out"):
            s3.create_bucket(Bucket=bucket)
        body = tiny_png()
        keys = [f"scans/{i // 1000:02d}/{i % 1000 // 100}/obj{i:06d}.png" for i in range(args.objects)]
        started = time.monotonic()
        with ThreadPoolExecutor(args.upload_threads) as pool:
            list(pool.map(lambda key: s3.put_object(Bucket="bench-in", Key=key, Body=body), keys))
        upload_s = time.monotonic() - started

        worker = start_listing_worker(settings, work / "worker.log")
        sampler = MemorySampler(worker.pid)
        sampler.start()
        time.sleep(1.0)  # an idle baseline
        broker = redis.Redis.from_url(args.redis)
        db = Database(pg_url)
        with TestClient(create_app(settings)) as api:
            api.headers["Authorization"] = f"Bearer {KEY}"
            posted = time.monotonic()
            response = api.post("/batches", json={"input_prefix": "s3://bench-in/scans/",
                                                  "output_prefix": "s3://bench-out/ocr/"})
            answered = time.monotonic()
            assert response.status_code == 202, response.text
            batch_id = response.json()["id"]
            jobs_at = published_at = None
            pages_seen: dict[int, float] = {}
            while published_at is None or jobs_at is None:
                with db.session() as session:
                    batch = session.get(Batch, batch_id)
                    jobs = session.scalar(select(func.count()).where(Job.batch_id == batch_id))
                now = time.monotonic()
                pages_seen.setdefault(batch.list_pages, now)
                if jobs_at is None and batch.listing_done and jobs == args.objects:
                    jobs_at = now
                if published_at is None and broker.llen(prefix + CONTROL_QUEUE) >= args.objects:
                    published_at = now
                if now - posted > 600:
                    raise RuntimeError(f"not done after 600 s: {jobs} jobs, {batch.list_pages} pages")
                time.sleep(0.02)
        time.sleep(1.0)
        sampler.stop.set()
        sampler.join()
        db.dispose()

        baseline = [s for s in sampler.samples if s[0] < posted]
        during = [s for s in sampler.samples if posted <= s[0] <= published_at]

        def child_rss_after_page(n: int) -> int:
            at = pages_seen.get(n)
            later = [s[2] for s in sampler.samples if at is not None and s[0] >= at]
            return later[0] if later else 0

        pages = max(pages_seen)
        result = {
            "objects": args.objects, "page_size": args.page_size, "pages": pages,
            "upload_s": round(upload_s, 1),
            "post_answer_s": round(answered - posted, 3),
            "all_jobs_in_db_s": round(jobs_at - posted, 2),
            "all_prepare_tasks_in_broker_s": round(published_at - posted, 2),
            "worker_main_rss_mib": {"idle": round(max(s[1] for s in baseline) / 1024, 1),
                                    "peak": round(max(s[1] for s in during) / 1024, 1)},
            "worker_child_rss_mib": {
                "idle": round(max(s[2] for s in baseline) / 1024, 1),
                "peak": round(max(s[2] for s in during) / 1024, 1),
                "after_page": {n: round(child_rss_after_page(n) / 1024, 1)
                               for n in sorted({1, 2, pages // 2, pages}) if n in pages_seen},
            },
            "nproc": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
            "load_average_at_start": os.getloadavg()[0],
        }
        print(json.dumps(result))
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, 9)
            worker.wait()
        server.stop()
        admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        admin.close()
        client = redis.Redis.from_url(args.redis)
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            client.delete(key)


def cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")


if __name__ == "__main__":
    main()
