"""Soak under faults: about 150 jobs on a private Postgres, Redis and SeaweedFS while workers are SIGKILLed
and every server is restarted; then count, in Postgres, what was lost and what was written twice.

Usage: .venv/bin/python -m bench.soak [--jobs 150] [--multipage 6] [--kills 54] [--workers 3] [--concurrency 1]
                                      [--tenant-cap 0] [--tenant-defer 2] [--window 420] [--out soak.json]

What it starts (all private, on free loopback ports, removed at the end): a Postgres, a Redis (no snapshots
of its own), SeaweedFS `weed mini`, the API in-process (the real app through TestClient), a webhook receiver,
and `--workers` real `ocrq worker --beat` processes (`--concurrency` pool processes each, CPU engine: rapidocr),
restarted by a supervisor loop whenever one dies, as systemd would. With `--tenant-cap N`
(OCRQ_TENANT_MAX_RUNNING_PAGES) the one tenant runs at most N pages at once, so workers keep deferring pages: each
such page waits out a countdown in its worker, held unacked in Redis and running nowhere.

Under load, across `--window` seconds while the jobs are being submitted:
- `--kills` SIGKILLs, alternating between a worker's main process (kill -9 of its pid; the supervisor then
  SIGKILLs what is left of its process group, as systemd's control-group kill mode does, and starts a new
  worker) and one of its pool children (the main process forks a new one). Busy workers are preferred, and for a
  worker kill one holding a deferred page (a countdown it waits out) when there is one.
- one Redis restart that keeps its data (SHUTDOWN SAVE, started again on the same folder), one Redis restart
  empty, one Postgres restart (SIGKILL, down a few seconds), one SeaweedFS restart (down a few seconds).
The jobs: one-word PNG pages (tests/batches/support.word_image), and `--multipage` PDFs of 3 to 5 such pages
(half of them asking for a PDF result, which is built and stored in S3). Every job has a webhook.

At the end (tally()): lost = a job not succeeded, or a page without a succeeded row holding its word, or a job
without exactly one job.succeeded event delivered; duplicate = a (job, page) with more than one row, a page
whose result was written more than once (the workers log "page read" only for the write that landed), a job
with more than one event row, or more than one distinct event (webhook-id) received for one job. Redeliveries
of the same webhook-id are counted apart (at-least-once delivery; the receiver dedupes by id).
Also: the time from the last fault to the last job done, per kill the time until the pages the killed
process held were done, and the time until each page it held started again (kill to reread): the running ones,
and the deferred ones apart. Prints a summary and writes the JSON result to --out.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx
from PIL import Image
from sqlalchemy import select

from common.db import Database
from common.jobs.models import Job, Page
from common.queue.depth import QueueDepths
from common.queue.leases import Lease
from common.queue.names import WEBHOOK_QUEUE, cpu_worker_queues
from common.settings import S3SourceProfile, Settings
from common.webhooks.models import WebhookDelivery
from tests.batches.support import word_for, word_image
from tests.support import webhook_receiver
from tests.support.private_services import private_services
from tests.support.stack import Stack

KEY = "ocrq_bench_soak_key_0000000000000000000"
HOOK = "/soak"
# Short sweeper timers, as the recovery tests use; the worker heartbeat at its defaults (2 s, lapsed after 12 s), so
# the kill-to-reread times are what a deployment gets. Recorded in the result.
TIMERS = {"sweep_interval_s": 2.0,
          "stale_requeue_after_s": 3, "outage_retry_after_s": 2, "engine_outage_retry_s": 1.0,
          "idempotency_wait_s": 0.5, "task_soft_time_limit_s": 60, "task_time_limit_s": 90,
          "visibility_timeout_s": 900, "webhook_retry_schedule_s": [0, 0.5, 1, 2, 4, 8]}


def utc() -> datetime:
    return datetime.now(UTC)


def multipage_pdf(words: list[str]) -> bytes:
    images = [Image.open(io.BytesIO(word_image(w))).convert("RGB") for w in words]
    buffer = io.BytesIO()
    images[0].save(buffer, "PDF", resolution=72, save_all=True, append_images=images[1:])
    return buffer.getvalue()


def plan_jobs(count: int, multipage: int) -> list[dict]:
    """`count` jobs: `multipage` PDFs of 3-5 pages spread among one-page PNGs; each page its own word."""
    plans, n = [], 0
    spots = {round((i + 0.5) * count / multipage) for i in range(multipage)} if multipage else set()
    for j in range(count):
        if j in spots:
            pages = 3 + len([s for s in spots if s < j]) % 3
            words = [word_for(n + k) for k in range(pages)]
            n += pages
            output = "pdf" if len([s for s in spots if s < j]) % 2 else "text"
            plans.append({"filename": f"doc{j}.pdf", "body": multipage_pdf(words), "words": words, "output": output})
        else:
            words = [word_for(n)]
            n += 1
            plans.append({"filename": f"page{j}.png", "body": word_image(words[0]), "words": words, "output": "text"})
    return plans


# -- counting -------------------------------------------------------------------------------------------------

def tally(*, expected: dict[str, list[str]], jobs: list[dict], pages: list[dict], events: list[dict],
          received: list[dict], writes: Counter) -> dict:
    """Lost and duplicate work from plain rows.

    expected: job id -> the word on each page; jobs: {id, status}; pages: {id, job_id, index, status, text,
    attempts}; events: webhook delivery rows {job_id, event_type, status}; received: {job_id, webhook_id} per
    POST the receiver got; writes: page id -> "page read" log lines (one per result write that landed).
    """
    by_job = {j["id"]: j for j in jobs}
    rows: dict[tuple[str, int], list[dict]] = {}
    for p in pages:
        rows.setdefault((p["job_id"], p["index"]), []).append(p)
    lost_jobs = sorted(j for j in expected if by_job.get(j, {}).get("status") != "succeeded")
    lost_pages, wrong_text = [], []
    for job_id, words in expected.items():
        for index, word in enumerate(words):
            found = [p for p in rows.get((job_id, index), []) if p["status"] == "succeeded"]
            if not found:
                lost_pages.append(f"{job_id}:{index}")
            elif word not in "".join((found[0]["text"] or "").split()):  # rapidocr may split a word in lines
                wrong_text.append(f"{job_id}:{index}")
    duplicate_rows = sorted(f"{j}:{i}" for (j, i), group in rows.items() if len(group) > 1)
    page_ids = {p["id"] for p in pages if p["job_id"] in expected}
    duplicate_writes = sorted(pid for pid in page_ids if writes.get(pid, 0) > 1)
    unwritten = sorted(pid for pid in page_ids if writes.get(pid, 0) == 0)
    job_events = Counter(e["job_id"] for e in events if e["event_type"].startswith("job."))
    delivered = Counter(e["job_id"] for e in events if e["event_type"] == "job.succeeded" and e["status"] == "delivered")
    ids_per_job: dict[str, set[str]] = {}
    posts = Counter()
    for r in received:
        ids_per_job.setdefault(r["job_id"], set()).add(r["webhook_id"])
        posts[r["webhook_id"]] += 1
    counts = {
        "jobs": len(expected),
        "pages": sum(len(w) for w in expected.values()),
        "lost_jobs": len(lost_jobs),
        "lost_pages": len(lost_pages),
        "wrong_text_pages": len(wrong_text),
        "lost_events": len([j for j in expected if delivered.get(j, 0) != 1 or j not in ids_per_job]),
        "duplicate_page_rows": len(duplicate_rows),
        "duplicate_result_writes": len(duplicate_writes),
        "pages_without_logged_write": len(unwritten),
        "duplicate_event_rows": len([j for j in expected if job_events.get(j, 0) > 1]),
        "duplicate_events_received": len([j for j, ids in ids_per_job.items() if len(ids) > 1]),
        "redelivered_same_event": sum(n - 1 for n in posts.values() if n > 1),
        "attempts": dict(sorted(Counter(str(p["attempts"]) for p in pages if p["job_id"] in expected).items())),
        "examples": {"lost_jobs": lost_jobs[:5], "lost_pages": lost_pages[:5], "wrong_text": wrong_text[:5],
                     "duplicate_rows": duplicate_rows[:5], "duplicate_writes": duplicate_writes[:5]},
    }
    counts["lost"] = counts["lost_jobs"] + counts["lost_pages"] + counts["lost_events"]
    counts["duplicate"] = (counts["duplicate_page_rows"] + counts["duplicate_result_writes"]
                           + counts["duplicate_event_rows"] + counts["duplicate_events_received"])
    counts["ok"] = counts["lost"] == 0 and counts["duplicate"] == 0 and counts["wrong_text_pages"] == 0
    return counts


def log_records(log_dir: Path, marker: str):
    """The JSON records of the workers' log lines that contain `marker`."""
    for path in log_dir.glob("worker-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if marker not in line:
                continue
            try:
                yield json.loads(line[line.index("{"):])
            except ValueError:
                continue


def logged_writes(log_dir: Path) -> Counter:
    """page id -> "page read" lines in the workers' JSON logs (logged once per result write that landed)."""
    writes: Counter = Counter()
    for record in log_records(log_dir, '"page read"'):
        if record.get("message") == "page read" and record.get("page_id"):
            writes[record["page_id"]] += 1
    return writes


# -- processes ------------------------------------------------------------------------------------------------

def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def pool_children(pid: int) -> list[int]:
    """The worker's pool processes: the children that loaded the engine (onnxruntime), not the beat process."""
    found = []
    for child in children(pid):
        try:
            if "onnxruntime" in Path(f"/proc/{child}/maps").read_text(errors="replace"):
                found.append(child)
        except OSError:
            continue
    return found


class Supervisor:
    """Keeps `size` workers running: a worker that died is cleaned up (its process group) and started again."""

    def __init__(self, stack: Stack, size: int, args: list[str]) -> None:
        self.stack, self.size, self.args = stack, size, args
        self.slots: list = [None] * size
        self.lock = threading.Lock()
        self.restarts = 0
        self.unplanned_exits = 0
        self.planned: set[int] = set()
        self.start_seconds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        for i in range(self.size):
            self.slots[i] = self._start_one()
        self._thread.start()

    def _start_one(self):
        for _ in range(5):
            started = time.monotonic()
            try:
                worker = self.stack.start_worker(*self.args, timeout=120)
            except RuntimeError as exc:  # e.g. it started while Postgres or Redis was down: try again
                print(f"  worker did not start: {str(exc)[:200]}", flush=True)
                time.sleep(2)
                continue
            self.start_seconds.append(time.monotonic() - started)
            return worker
        raise RuntimeError("a worker would not start five times in a row")

    def _run(self) -> None:
        while not self._stop.is_set():
            for i, worker in enumerate(list(self.slots)):
                if worker is None or worker.process.poll() is None:
                    continue
                pid = worker.process.pid
                if pid not in self.planned:
                    self.unplanned_exits += 1
                    print(f"  worker {pid} exited on its own ({worker.process.returncode})", flush=True)
                try:
                    os.killpg(pid, signal.SIGKILL)  # what is left of its group: orphaned pool children, beat
                except ProcessLookupError:
                    pass
                replacement = self._start_one()
                with self.lock:
                    self.slots[i] = replacement
                    self.restarts += 1
            self._stop.wait(0.3)

    def live(self) -> list:
        with self.lock:
            return [w for w in self.slots if w is not None and w.process.poll() is None]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=150)


# -- the run --------------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--multipage", type=int, default=6, help="how many of the jobs are PDFs of 3-5 pages")
    parser.add_argument("--kills", type=int, default=54, help="SIGKILLs of worker main processes and pool children")
    parser.add_argument("--workers", type=int, default=3, help="worker processes kept running")
    parser.add_argument("--concurrency", type=int, default=1, help="pool processes of each worker")
    parser.add_argument("--tenant-cap", type=int, default=0, help="OCRQ_TENANT_MAX_RUNNING_PAGES (0: no cap)")
    parser.add_argument("--tenant-defer", type=float, default=2.0,
                        help="OCRQ_TENANT_DEFER_S: how long a capped page waits, held by a worker, before a new try")
    parser.add_argument("--window", type=float, default=420.0, help="seconds over which jobs and faults are spread")
    parser.add_argument("--drain-timeout", type=float, default=600.0, help="seconds to wait after the last fault")
    parser.add_argument("--page-retries", type=int, default=6,
                        help="attempts a page may use up (each claim is one; a kill mid-read costs one)")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("soak.json"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="ocrq-soak-"))
    logs = work / "logs"
    logs.mkdir()
    print(f"soak: {args.jobs} jobs, {args.kills} kills, {args.workers} workers, window {args.window:.0f} s; "
          f"files in {work}", flush=True)
    plans = plan_jobs(args.jobs, args.multipage)

    with private_services(work, tenant="soak", api_key=KEY, net_allowlist=["127.0.0.1/32"],
                          s3_source_profiles={"service": S3SourceProfile(tenants=["*"], read=["*"], write=["*"],
                                                                         use_service_credentials=True)},
                          log_format="json", page_retries=args.page_retries,
                          tenant_max_running_pages=args.tenant_cap, tenant_defer_s=args.tenant_defer,
                          **TIMERS) as services:
        result = run(args, rng, services.settings, plans, pg=services.pg, rd=services.redis, s3=services.s3,
                     logs=logs)
    result |= {"command": " ".join(["python -m bench.soak", *sys.argv[1:]]), "work_dir": str(work)}
    args.out.write_text(json.dumps(result, indent=2, default=str))
    summary(result)
    print(f"result: {args.out}")
    sys.exit(0 if result["counts"]["ok"] else 1)


def run(args, rng, settings: Settings, plans: list[dict], *, pg, rd, s3, logs: Path) -> dict:
    receiver = webhook_receiver.start()
    db = Database(settings.resolved_database_url)
    worker_args = ["--beat", "--concurrency", str(args.concurrency),
                   "--queues", ",".join([*cpu_worker_queues(), WEBHOOK_QUEUE])]
    loads: list[tuple[float, float]] = []
    with Stack(settings, logs=logs) as stack:
        client = stack.client(KEY)
        receiver.secrets = [client.get("/webhooks/secret").json()["secret"]]
        hook = receiver.plan(HOOK)
        supervisor = Supervisor(stack, args.workers, worker_args)
        supervisor.start()
        print(f"{args.workers} workers ready; starting", flush=True)

        accepted: dict[str, list[str]] = {}
        statuses: Counter = Counter()
        begun = time.monotonic()
        submit_span = args.window * 0.85

        def submit_all() -> None:
            for n, plan in enumerate(plans):
                wait = begun + n * submit_span / len(plans) - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    try:
                        response = client.post("/jobs", files={"file": (plan["filename"], plan["body"])},
                                               data={"output": plan["output"], "webhook_url": hook})
                    except Exception as exc:  # noqa: BLE001  (an unhandled error inside the app: counted as a 500)
                        statuses[f"raised {exc.__class__.__name__}"] += 1
                        time.sleep(1)
                        continue
                    statuses[str(response.status_code)] += 1
                    if response.status_code == 202:
                        accepted[response.json()["id"]] = plan["words"]
                        break
                    time.sleep(float(response.headers.get("Retry-After", 1)) / 4)

        sender = threading.Thread(target=submit_all, daemon=True)
        sender.start()

        faults = schedule(args, rng)
        events: list[dict] = []
        for at, kind in faults:
            wait = begun + at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            loads.append((round(time.monotonic() - begun, 1), os.getloadavg()[0]))
            event = apply_fault(kind, rng, supervisor=supervisor, db=db, pg=pg, rd=rd, s3=s3, settings=settings)
            if event:
                event["t"] = round(time.monotonic() - begun, 1)
                events.append(event)
                print(f"  t={event['t']:6.1f}s {event['kind']:<14} {event.get('detail', '')}", flush=True)
        last_fault_at = utc()
        last_fault_t = time.monotonic() - begun
        sender.join(timeout=300)
        print(f"faults done at t={last_fault_t:.0f}s; {len(accepted)} jobs accepted; draining", flush=True)

        deadline = time.monotonic() + args.drain_timeout
        while time.monotonic() < deadline:
            with db.session() as session:
                open_jobs = session.scalar(select(Job.id).where(
                    Job.id.in_(list(accepted)), Job.status.not_in(["succeeded", "failed", "canceled"])).limit(1))
                pending = session.scalar(select(WebhookDelivery.id).where(
                    WebhookDelivery.status == "pending").limit(1))
            if len(accepted) == len(plans) and open_jobs is None and pending is None:
                break
            loads.append((round(time.monotonic() - begun, 1), os.getloadavg()[0]))
            time.sleep(2)
        drained_t = time.monotonic() - begun
        time.sleep(3 * settings.sweep_interval_s)  # another sweep or two: a spare copy would show by now
        supervisor.stop()

        with db.session() as session:
            jobs = [{"id": j.id, "status": j.status, "finished_at": j.finished_at, "output": j.output,
                     "result_key": j.result_key} for j in session.scalars(select(Job))]
            pages = [{"id": p.id, "job_id": p.job_id, "index": p.index, "status": p.status, "text": p.text,
                      "attempts": p.attempts, "started_at": p.started_at, "finished_at": p.finished_at,
                      "error": p.error}
                     for p in session.scalars(select(Page))]
            deliveries = [{"job_id": d.job_id, "event_type": d.event_type, "status": d.status}
                          for d in session.scalars(select(WebhookDelivery))]
        pdf_missing = [j["id"] for j in jobs if j["output"] == "pdf" and j["status"] == "succeeded"
                       and not pdf_result(client, j["id"]).startswith(b"%PDF")]
    received = []
    for r in receiver.to(HOOK):
        try:
            received.append({"job_id": json.loads(r.body)["data"]["id"], "webhook_id": r.headers["webhook-id"]})
        except (ValueError, KeyError):
            continue
    receiver.shutdown()
    db.dispose()

    counts = tally(expected=accepted, jobs=jobs, pages=pages, events=deliveries, received=received,
                   writes=logged_writes(logs))
    counts["pdf_results_missing"] = len(pdf_missing)
    counts["ok"] = counts["ok"] and not pdf_missing and len(accepted) == len(plans)
    finished = [j["finished_at"] for j in jobs if j["finished_at"]]
    last_done = max(finished) if finished else None
    by_page = {p["id"]: p for p in pages}
    recoveries, restarts, rereads, deferred_rereads, requeues = [], [], [], [], []
    lapsed_at = lapses_logged(logs)
    for event in events:
        held = [by_page[pid]["finished_at"] for pid in event.get("pages", []) if pid in by_page]
        if held and all(held):
            event["recovered_s"] = round((max(held) - event["at"]).total_seconds(), 1)
            recoveries.append(event["recovered_s"])
        # Kill to the page's next start (started_at is stamped at each claim), for the pages it was reading.
        again = [by_page[pid]["started_at"] for pid in event.get("running", []) if pid in by_page]
        if again and all(t and t > event["at"] for t in again):
            event["restarted_s"] = round((max(again) - event["at"]).total_seconds(), 1)
            restarts.append(event["restarted_s"])
        # Kill to the scheduler queueing the killed worker's pages again (its lease lapsed), from the workers' logs.
        if event.get("lease") in lapsed_at:
            event["requeued_s"] = round((lapsed_at[event["lease"]] - event["at"]).total_seconds(), 1)
            requeues.append(event["requeued_s"])
        # Kill to the next start of every page a killed worker held (running, prefetched or deferred).
        for pid in event.get("pages", []) if event["kind"] == "kill_main" else []:
            started = by_page.get(pid, {}).get("started_at")
            if started and started > event["at"]:
                waited = round((started - event["at"]).total_seconds(), 1)
                rereads.append(waited)
                if pid in event.get("deferred", []):
                    deferred_rereads.append(waited)
                    event.setdefault("deferred_reread_s", []).append(waited)
        if event["kind"].startswith(("redis", "postgres", "s3")):
            after = [p["finished_at"] for p in pages if p["finished_at"] and p["finished_at"] > event["up_at"]]
            event["first_page_after_s"] = round((min(after) - event["up_at"]).total_seconds(), 1) if after else None
    kinds = Counter(e["kind"] for e in events)
    return {
        "when": utc().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_avg_during": {"max": max(v for _, v in loads), "median": statistics.median(v for _, v in loads)},
                    "load_samples": loads[::5]},
        "settings": {"workers": args.workers, "concurrency": args.concurrency, "tenant_cap": args.tenant_cap,
                     "tenant_defer_s": args.tenant_defer,
                     "page_retries": args.page_retries, "heartbeat_interval_s": settings.heartbeat_interval_s,
                     "heartbeat_lapse_s": settings.heartbeat_lapse_s, **TIMERS, "window_s": args.window,
                     "seed": args.seed},
        "counts": counts,
        "faults": dict(kinds),
        "worker_restarts": supervisor.restarts,
        # Pool children Celery killed for not reporting up in time (worker_proc_alive_timeout) while loading.
        "pool_children_killed_starting": sum(path.read_bytes().count(b"Timed out waiting for UP message")
                                             for path in logs.glob("worker-*.log")),
        "worker_unplanned_exits": supervisor.unplanned_exits,
        "worker_start_s_median": round(statistics.median(supervisor.start_seconds), 1),
        "api_statuses": dict(statuses),
        "last_fault_t_s": round(last_fault_t, 1),
        "drained_t_s": round(drained_t, 1),
        "last_fault_to_last_job_done_s": round((last_done - last_fault_at).total_seconds(), 1) if last_done else None,
        "kill_recovery_s": {"kills_with_pages": len(recoveries),
                            "median": statistics.median(recoveries) if recoveries else None,
                            "max": max(recoveries) if recoveries else None},
        "kill_to_next_start_s": {"kills_reading": len(restarts),
                                 "median": statistics.median(restarts) if restarts else None,
                                 "max": max(restarts) if restarts else None},
        "kill_to_requeued_s": spread(requeues),
        "kill_to_reread_s": spread(rereads),
        "deferred_kill_to_reread_s": spread(deferred_rereads),
        "kills_holding_deferred_pages": len([e for e in events if e.get("deferred")]),
        "extra_claims_not_explained_by_a_kill": extra_claims(pages, events),
        "events": [{k: v for k, v in e.items() if k not in ("pages", "running", "deferred")}
                   | {"held_pages": len(e.get("pages", [])), "deferred_pages": len(e.get("deferred", []))}
                   for e in events],
        "failed_page_errors": sorted({p["error"] for p in pages if p["status"] == "failed"})[:10],
    }


def spread(times: list[float]) -> dict:
    """How many, median and max of a list of seconds, and every one."""
    if not times:
        return {"n": 0}
    return {"n": len(times), "median": statistics.median(times), "max": max(times), "all": sorted(times)}


def extra_claims(pages: list[dict], events: list[dict]) -> int:
    """Claims beyond the first that no kill of the page's reader accounts for (a sign of a page read twice)."""
    killed = Counter(pid for e in events for pid in e.get("running", []))
    return sum(max(0, p["attempts"] - 1 - killed.get(p["id"], 0)) for p in pages)


def pdf_result(client, job_id: str) -> bytes:
    """The job's stored PDF: the API answers 303 to a presigned SeaweedFS URL."""
    response = client.get(f"/jobs/{job_id}/result", params={"format": "pdf"}, follow_redirects=False)
    if response.status_code == 303:
        return httpx.get(response.headers["location"], timeout=30).content
    return response.content


def schedule(args, rng) -> list[tuple[float, str]]:
    """Kills spread over the window, alternating main and child, and the four server restarts among them."""
    span = args.window * 0.95
    kills = [(span * (i + 0.5) / args.kills + rng.uniform(-1.5, 1.5), "kill_main" if i % 2 else "kill_child")
             for i in range(args.kills)]
    servers = [(span * 0.2, "redis_keep"), (span * 0.4, "postgres"), (span * 0.6, "s3"), (span * 0.8, "redis_empty")]
    return sorted(kills + servers)


def holdings(db: Database, pid: int) -> tuple[list[str], list[str]]:
    """(running pages claimed by the worker whose main pid is `pid`, pages its heartbeat lists)."""
    try:
        with db.session() as session:
            lease = session.scalar(select(Lease).where(Lease.holder.endswith(f"pid {pid}")))
            if lease is None:
                return [], []
            running = list(session.scalars(select(Page.id).where(Page.status == "running",
                                                                 Page.claimed_by == lease.name)))
            return running, list(lease.pages or [])
    except Exception:  # noqa: BLE001  (Postgres restarting)
        return [], []


def lease_of(db: Database, pid: int) -> str | None:
    """The heartbeat lease name of the worker whose main pid is `pid`."""
    try:
        with db.session() as session:
            return session.scalar(select(Lease.name).where(Lease.holder.endswith(f"pid {pid}")))
    except Exception:  # noqa: BLE001  (Postgres restarting)
        return None


def lapses_logged(log_dir: Path) -> dict[str, datetime]:
    """lease name -> when the scheduler logged its lapse and queued its pages again (the workers' JSON logs)."""
    return {record["worker"]: datetime.fromisoformat(record["ts"])
            for record in log_records(log_dir, "heartbeat lapsed") if record.get("worker")}


def deferred_pages(settings: Settings) -> set[str]:
    """Pages whose message some worker holds unacked until a countdown (the tenant cap's deferral) is over."""
    reader = QueueDepths(settings, known=())
    try:
        raws = reader.redis.hvals(reader.prefix + "unacked")
    except Exception:  # noqa: BLE001  (Redis restarting)
        return set()
    finally:
        reader.close()
    found = set()
    for raw in raws:
        headers = json.loads(raw)[0].get("headers", {})
        if headers.get("eta") and headers.get("task", "").endswith("ocr_page"):
            found.add(headers.get("argsrepr", "").strip("[]()', "))
    return found


def apply_fault(kind: str, rng, *, supervisor: Supervisor, db: Database, pg, rd, s3,
                settings: Settings) -> dict | None:
    if kind.startswith("kill"):
        live = supervisor.live()
        if not live:
            return None
        held = {w.process.pid: holdings(db, w.process.pid) for w in live}
        waiting = deferred_pages(settings)
        busy = [w for w in live if held[w.process.pid][0]]
        deferring = [w for w in live if waiting & set(held[w.process.pid][1])]
        worker = rng.choice(busy if busy and rng.random() < 0.8 else live)
        if kind == "kill_main" and deferring:
            worker = rng.choice(deferring)
        running, listed = held[worker.process.pid]
        if kind == "kill_child":
            pool = pool_children(worker.process.pid)
            if not pool:
                kind = "kill_main"  # its pool child is not up yet: kill the worker instead
            else:
                at = utc()
                os.kill(rng.choice(pool), signal.SIGKILL)
                return {"kind": kind, "at": at, "pages": running, "running": running,
                        "detail": f"child of {worker.process.pid}, "
                        f"{len(running)} running"}
        supervisor.planned.add(worker.process.pid)
        lease = lease_of(db, worker.process.pid)
        at = utc()
        os.kill(worker.process.pid, signal.SIGKILL)
        pages = list(dict.fromkeys(running + listed))
        deferred = sorted(waiting & set(listed) - set(running))
        return {"kind": kind, "at": at, "pages": pages, "running": running, "deferred": deferred, "lease": lease,
                "detail": f"{worker.process.pid}, {len(running)} running, {len(pages)} held, {len(deferred)} deferred"}
    at = utc()
    if kind == "redis_keep":
        rd.restart(keep_data=True)
    elif kind == "redis_empty":
        rd.restart(keep_data=False)
    elif kind == "postgres":
        pg.stop(hard=True)
        time.sleep(3)
        pg.start()
    elif kind == "s3":
        s3.restart(down_s=5)
    up = utc()
    return {"kind": kind, "at": at, "up_at": up, "detail": f"down {(up - at).total_seconds():.1f} s"}


def summary(result: dict) -> None:
    c = result["counts"]
    print("\n## soak")
    print(f"- jobs {c['jobs']}, pages {c['pages']}; faults {result['faults']}; worker restarts "
          f"{result['worker_restarts']} (unplanned exits {result['worker_unplanned_exits']}); pool children killed "
          f"while starting {result['pool_children_killed_starting']}")
    print(f"- lost {c['lost']} (jobs {c['lost_jobs']}, pages {c['lost_pages']}, events {c['lost_events']}); "
          f"wrong text {c['wrong_text_pages']}; pdf results missing {c['pdf_results_missing']}")
    print(f"- duplicate {c['duplicate']} (page rows {c['duplicate_page_rows']}, result writes "
          f"{c['duplicate_result_writes']}, event rows {c['duplicate_event_rows']}, events received "
          f"{c['duplicate_events_received']}); same event redelivered {c['redelivered_same_event']}")
    print(f"- attempts per page {c['attempts']}; API answers {result['api_statuses']}")
    print(f"- last fault at t={result['last_fault_t_s']} s; last job done {result['last_fault_to_last_job_done_s']} s "
          f"after it")
    print(f"- kill to the pages it held done {result['kill_recovery_s']}; kill to the running page's next start "
          f"{result['kill_to_next_start_s']}; claims no kill explains {result['extra_claims_not_explained_by_a_kill']}"
          f"; pages without a logged write {c['pages_without_logged_write']}")
    for e in result["events"]:
        if "first_page_after_s" in e:
            print(f"- {e['kind']}: {e['detail']}, first page done {e['first_page_after_s']} s after it was back")
    print(f"- kill of a worker to its pages queued again (its lease lapsed) {result['kill_to_requeued_s']}")
    print(f"- kill of a worker to each page it held started again {result['kill_to_reread_s']}; of those, the "
          f"deferred pages {result['deferred_kill_to_reread_s']} ({result['kills_holding_deferred_pages']} kills held "
          f"deferred pages)")
    print(f"- load average during the run: {result['machine']['load_avg_during']}")
    print(f"- verdict: {'OK' if c['ok'] else 'FAILED'}")


if __name__ == "__main__":
    main()
