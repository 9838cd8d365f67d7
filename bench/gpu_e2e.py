"""Pages/s end to end through a running ocrq (API -> S3 -> Celery -> engine -> Postgres), and priority lanes under load.

    python bench/gpu_e2e.py e2e   --pages 512 --tokens 1000 --direct-url http://127.0.0.1:8100 --out results.jsonl
    python bench/gpu_e2e.py e2e   --pages 2000 --pages-per-job 100 --tokens 1000
    python bench/gpu_e2e.py lanes --idle 10 --backlog 2000 --duration 60 --tokens 1000

A pure HTTP client of the ocrq API (and, with --direct-url, of the engine itself, through bench/gpu_raw.py's
driver on the same pages). The pages are gpu_raw.py's synthetic 1190x1540 text-like pages; each generates exactly
--tokens tokens when the stack was started with that count (deploy/gpu/stack.sh start TOKENS), which is what
--tokens records. The API URL and key default to what deploy/gpu/stack.sh wrote under $OCRQ_SVC_HOME/stack/.

e2e:   N single-page PNG jobs (or N/K jobs of K pages, multi-page TIFF or PDF), priority bulk, sent by parallel
       submitters; pages/s = pages read / (last job finished (server clock) - first submit). Also the steady rate
       between 10 % and 90 % of the pages, job latency (submit -> finished_at) and failures with their reasons.
lanes: interactive single-page jobs one at a time on the idle stack (time to result, polled every 50 ms), then a
       bulk backlog (J multi-page jobs) and, while it is worked, one interactive page a second for D seconds;
       reports idle vs loaded p50/p95, their p95 ratio, the bulk pages/s over that window, then cancels the backlog.
       The bulk engine sends its pages in waves that finish together, so pages done over a short window are lumpy;
       with --bulk-engine-url the window's rate is also read from that engine's generated-token counter
       (vllm:generation_tokens_total / --tokens = pages' worth of decoding a second).
Each run prints one JSON line and appends it to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_raw
from host_watch import HostWatch

TERMINAL = {"succeeded", "failed", "canceled"}
SVC_HOME = Path(os.environ.get("OCRQ_SVC_HOME", "/root/ocrq-svc"))


# --- documents ---------------------------------------------------------------------------------------------
def page_png(seed: int) -> bytes:
    """gpu_raw's page for this seed, as gpu_raw encodes it (PNG, fast compression)."""
    buffer = io.BytesIO()
    gpu_raw.make_page(gpu_raw.PAGE, seed=seed % gpu_raw.VARIANTS).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def multipage(count: int, *, fmt: str, first_seed: int = 0) -> bytes:
    """`count` of gpu_raw's pages in one document: TIFF frames (read at their own size) or PDF pages."""
    frames = [gpu_raw.make_page(gpu_raw.PAGE, seed=(first_seed + i) % gpu_raw.VARIANTS) for i in range(count)]
    buffer = io.BytesIO()
    if fmt == "tiff":
        frames[0].save(buffer, format="TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate")
    else:  # 200 DPI: rendered back to a 1540 px longest side, the same 1190x1540
        frames[0].save(buffer, format="PDF", save_all=True, append_images=frames[1:], resolution=200.0)
    return buffer.getvalue()


MIME = {"png": "image/png", "tiff": "image/tiff", "pdf": "application/pdf"}


# --- the API ---------------------------------------------------------------------------------------------------
class Api:
    def __init__(self, url: str, key: str, *, connections: int = 64) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                                   limits=limits)

    def submit(self, data: bytes, *, fmt: str, priority: str, name: str) -> tuple[str, float]:
        """POST /jobs; the job id and the wall-clock time the request was sent."""
        sent = time.time()
        for attempt in range(5):
            response = self.client.post("/jobs", files={"file": (f"{name}.{fmt}", data, MIME[fmt])},
                                        data={"priority": priority, "output": "markdown"})
            if response.status_code not in (429, 503) or attempt == 4:
                break
            time.sleep(0.5 * (attempt + 1))
        if response.status_code != 202:
            raise RuntimeError(f"POST /jobs answered {response.status_code}: {response.text[:300]}")
        return response.json()["id"], sent

    def job(self, job_id: str) -> dict:
        return self.client.get(f"/jobs/{job_id}").raise_for_status().json()

    def cancel(self, job_id: str) -> None:
        self.client.delete(f"/jobs/{job_id}")


def epoch(stamp: str | None) -> float | None:
    return datetime.fromisoformat(stamp).timestamp() if stamp else None


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile, in seconds to the ms."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))], 3)


def pages_ok(job: dict) -> int:
    return max(0, job.get("pages_done", 0) - job.get("pages_failed", 0)) if job["status"] == "succeeded" else 0


def reasons(jobs: list[dict]) -> dict[str, int]:
    """Why jobs or pages failed, the most common first (page errors and job errors, cut to 160 characters)."""
    counts: Counter[str] = Counter()
    for job in jobs:
        if job["status"] in ("failed", "canceled") and job.get("error"):
            counts[f"job {job['status']}: {job['error'][:160]}"] += 1
        elif job["status"] not in TERMINAL:
            counts[f"job still {job['status']} at the end"] += 1
        for err in job.get("page_errors") or []:
            counts[f"page: {err.get('error', '')[:160]}"] += 1
    return dict(counts.most_common(8))


def submit_all(api: Api, docs: list[tuple[bytes, str]], *, priority: str, submitters: int) -> list[tuple[str, float]]:
    """Submit every (data, format) with `submitters` threads; (job id, sent time) in the order given."""
    with ThreadPoolExecutor(max_workers=submitters) as pool:
        return list(pool.map(lambda item: api.submit(item[1][0], fmt=item[1][1], priority=priority,
                                                     name=f"p{item[0]:05d}"), enumerate(docs)))


def wait_all(api: Api, ids: list[str], *, interval: float, timeout: float, window: int = 64,
             pollers: int = 8) -> dict[str, dict]:
    """Poll until every job is terminal or `timeout` s pass. Jobs finish roughly in order, so each round asks
    about the oldest `window` unfinished ones only; the times reported come from the server, not from polling."""
    last: dict[str, dict] = {}
    open_ids = list(ids)
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(max_workers=pollers) as pool:
        while open_ids and time.monotonic() < deadline:
            batch = open_ids[:window]
            for job in pool.map(api.job, batch):
                last[job["id"]] = job
            done = {j for j in batch if last[j]["status"] in TERMINAL}
            open_ids = [j for j in open_ids if j not in done]
            if open_ids and not done:
                time.sleep(interval)
        for job in pool.map(api.job, open_ids):  # the state of what never finished
            last[job["id"]] = job
    return last


# --- e2e ----------------------------------------------------------------------------------------------------------
def run_e2e(args: argparse.Namespace, api: Api) -> dict:
    per_job = max(1, args.pages_per_job)
    jobs_n = -(-args.pages // per_job)
    variants = [page_png(seed) for seed in range(gpu_raw.VARIANTS)]
    if per_job == 1:
        docs = [(variants[i % gpu_raw.VARIANTS], "png") for i in range(jobs_n)]
    else:
        doc = multipage(per_job, fmt=args.doc_format)
        docs = [(doc, args.doc_format)] * jobs_n
    pages = jobs_n * per_job
    direct = direct_watch = None
    if args.direct_url and args.direct_when == "before":
        before_direct = gpu_raw.engine_counters(args.direct_url, PHASE_SERIES)
        with HostWatch(args.direct_url) as direct_watch:
            direct = run_direct(args, pages)
        after_direct = gpu_raw.engine_counters(args.direct_url, PHASE_SERIES)

    warm = variants[0] if per_job == 1 else page_png(0)  # one page through every process on the path first
    wait_all(api, [api.submit(warm, fmt="png", priority=args.priority, name="warm")[0]], interval=0.2, timeout=600)
    before_stack = gpu_raw.engine_counters(args.direct_url, PHASE_SERIES)
    with HostWatch(args.direct_url) as stack_watch:
        started = time.time()
        sent = submit_all(api, docs, priority=args.priority, submitters=args.submitters)
        submitted = time.time()
        final = wait_all(api, [job_id for job_id, _ in sent], interval=args.poll, timeout=args.timeout)
    jobs = [final[job_id] for job_id, _ in sent]
    after_stack = gpu_raw.engine_counters(args.direct_url, PHASE_SERIES)

    ok = [j for j in jobs if j["status"] == "succeeded"]
    read = sum(pages_ok(j) for j in jobs)
    ends = sorted(epoch(j["finished_at"]) for j in ok)
    wall = (ends[-1] - started) if ends else float("nan")
    latency = [epoch(j["finished_at"]) - t for (_, t), j in zip(sent, jobs) if j["status"] == "succeeded"]
    waits = [epoch(j["started_at"]) - epoch(j["created_at"]) for j in jobs if j.get("started_at")]
    # Steady rate: pages finished between the 10 % and the 90 % mark (per-job ends; one page a job by default).
    steady = None
    page_ends = sorted(e for j in ok for e in [epoch(j["finished_at"])] * pages_ok(j))
    if len(page_ends) >= 20:
        lo, hi = page_ends[len(page_ends) // 10], page_ends[len(page_ends) * 9 // 10]
        steady = round((len(page_ends) * 8 // 10) / (hi - lo), 3) if hi > lo else None
    result = {
        "mode": "e2e",
        "label": args.label,
        "pages": pages,
        "jobs": jobs_n,
        "pages_per_job": per_job,
        "doc_format": "png" if per_job == 1 else args.doc_format,
        "priority": args.priority,
        "submitters": args.submitters,
        "tokens_forced": args.tokens,
        "pages_ok": read,
        "pages_failed": sum(j.get("pages_failed", 0) for j in jobs),
        "jobs_failed": sum(j["status"] != "succeeded" for j in jobs),
        "failures": reasons(jobs),
        "submit_s": round(submitted - started, 2),
        "wall_s": round(wall, 2),
        "pages_per_s": round(read / wall, 3) if ends else 0.0,
        "steady_pages_per_s": steady,
        "job_latency_p50_s": pct(latency, 50),
        "job_latency_p95_s": pct(latency, 95),
        "job_latency_max_s": pct(latency, 100),
        "queue_wait_p50_s": pct(waits, 50),
    }
    result["engine_phases_stack"] = engine_phases(before_stack, after_stack)
    result["host_stack"] = stack_watch.summary()
    if args.direct_url and direct is None:
        before_direct = after_stack
        with HostWatch(args.direct_url) as direct_watch:
            direct = run_direct(args, pages)
        after_direct = gpu_raw.engine_counters(args.direct_url, PHASE_SERIES)
    if direct:
        result["engine_phases_direct"] = engine_phases(before_direct, after_direct)
        result["host_direct"] = direct_watch.summary()
        result["direct"] = {k: direct[k] for k in ("pages", "ok", "failed", "wall_s", "pages_per_s",
                                                    "generated_tok_per_s", "mean_completion_tokens",
                                                    "latency_p50_s", "first_error") if k in direct}
        result["direct_when"] = args.direct_when
        result["direct_request"] = "plain" if args.direct_plain else "like-stack"
        result["e2e_over_direct"] = round(result["pages_per_s"] / direct["pages_per_s"], 3) \
            if direct.get("pages_per_s") else None
    return result


def run_direct(args: argparse.Namespace, pages: int) -> dict:
    """gpu_raw.py's HTTP driver on the same engine, the same pages (gpu_raw's variants) and the same tokens; by
    default the same request as the stack's (--like-stack: logprobs, pages turned upright and encoded as sent)."""
    direct_args = gpu_raw.arguments().parse_args([
        "http", "--url", args.direct_url, "--model", args.model, "--pages", str(pages), "--tokens", str(args.tokens),
        "--concurrency", str(args.direct_concurrency), "--timeout", str(args.timeout), "--label", args.label,
        *([] if args.direct_plain else ["--like-stack"]),
    ])
    return asyncio.run(gpu_raw.run_http(direct_args))


# --- lanes --------------------------------------------------------------------------------------------------------
def time_to_result(api: Api, data: bytes, *, poll: float, timeout: float) -> dict:
    """Submit one interactive page and poll it every `poll` s: seconds to the result, seen and by the server."""
    job_id, sent = api.submit(data, fmt="png", priority="interactive", name="interactive")
    deadline = time.monotonic() + timeout
    while True:
        job = api.job(job_id)
        if job["status"] in TERMINAL or time.monotonic() > deadline:
            break
        time.sleep(poll)
    seen = time.time()
    finished = epoch(job.get("finished_at"))
    return {"id": job_id, "status": job["status"], "seen_s": seen - sent,
            "server_s": (finished - sent) if finished else None, "job": job}


def bulk_done(api: Api, ids: list[str]) -> tuple[int, int, float]:
    """Pages done and pages left over the bulk jobs, with the time of the reading."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        jobs = list(pool.map(api.job, ids))
    done = sum(j["pages_done"] for j in jobs)
    left = sum(j["pages_total"] - j["pages_done"] for j in jobs if j["status"] not in TERMINAL)
    return done, left, time.time()


def generated_tokens(engine_url: str | None) -> float | None:
    return gpu_raw.engine_counter(engine_url, "vllm:generation_tokens_total")


# vLLM's per-request phases (histograms): where a page's time at the engine went, direct against the stack.
ENGINE_PHASES = ("queue", "prefill", "decode", "inference")
PHASE_SUM_COUNT = {phase: (f"vllm:request_{phase}_time_seconds_sum", f"vllm:request_{phase}_time_seconds_count")
                   for phase in ENGINE_PHASES}
# Tokens a request, to see that both halves sent the engine the same prompts and got the same lengths back.
TOKEN_SUM_COUNT = {kind: (f"vllm:request_{kind}_tokens_sum", f"vllm:request_{kind}_tokens_count")
                   for kind in ("prompt", "generation")}
PHASE_SERIES = [name for pair in (*PHASE_SUM_COUNT.values(), *TOKEN_SUM_COUNT.values()) for name in pair]


def engine_phases(before: dict[str, float], after: dict[str, float]) -> dict[str, float] | None:
    """Mean seconds a request spent in each phase, and mean tokens, between two readings of the engine's metrics."""
    means = {}
    for phase, (total, count) in {**PHASE_SUM_COUNT, **TOKEN_SUM_COUNT}.items():
        if {total, count} <= before.keys() & after.keys() and after[count] > before[count]:
            means[phase] = round((after[total] - before[total]) / (after[count] - before[count]), 3)
    return means or None


def run_lanes(args: argparse.Namespace, api: Api) -> dict:
    png = page_png(99)
    idle = []
    time_to_result(api, png, poll=args.lane_poll, timeout=args.timeout)  # warm every process on the path
    for _ in range(args.idle):
        idle.append(time_to_result(api, png, poll=args.lane_poll, timeout=args.timeout))

    per_job = -(-args.backlog // args.backlog_jobs)
    doc = multipage(per_job, fmt=args.doc_format)
    bulk = [job_id for job_id, _ in submit_all(api, [(doc, args.doc_format)] * args.backlog_jobs,
                                                  priority="bulk", submitters=args.submitters)]
    split_deadline = time.monotonic() + 300
    while time.monotonic() < split_deadline and any(api.job(j)["pages_total"] == 0 for j in bulk):
        time.sleep(0.5)
    time.sleep(args.warmup)  # let the engine fill up with bulk pages

    loaded: list[dict] = []
    lock = threading.Lock()

    def one() -> None:
        outcome = time_to_result(api, png, poll=args.lane_poll, timeout=args.timeout)
        with lock:
            loaded.append(outcome)

    start_done, _, t0 = bulk_done(api, bulk)
    tokens0 = generated_tokens(args.bulk_engine_url)
    threads = []
    for i in range(int(args.duration / args.interval)):
        thread = threading.Thread(target=one, daemon=True)
        thread.start()
        threads.append(thread)
        time.sleep(max(0.0, t0 + (i + 1) * args.interval - time.time()))
    end_done, left, t1 = bulk_done(api, bulk)
    tokens1 = generated_tokens(args.bulk_engine_url)
    deadline = time.monotonic() + args.lane_wait
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    canceled = 0
    if not args.keep_backlog:
        for job_id in bulk:
            api.cancel(job_id)
            canceled += 1

    with lock:
        loaded = list(loaded)

    def stats(rows: list[dict]) -> dict:
        ok = [r["server_s"] for r in rows if r["status"] == "succeeded" and r["server_s"] is not None]
        seen = [r["seen_s"] for r in rows if r["status"] == "succeeded"]
        return {"n": len(rows), "ok": len(ok), "p50_s": pct(ok, 50), "p95_s": pct(ok, 95), "max_s": pct(ok, 100),
                "seen_p50_s": pct(seen, 50), "seen_p95_s": pct(seen, 95),
                "failures": reasons([r["job"] for r in rows if r["status"] != "succeeded"])}

    idle_stats, load_stats = stats(idle), stats(loaded)
    return {
        "mode": "lanes",
        "label": args.label,
        "tokens_forced": args.tokens,
        "interactive_idle": idle_stats,
        "interactive_loaded": load_stats,
        "p95_ratio": round(load_stats["p95_s"] / idle_stats["p95_s"], 2)
        if idle_stats["p95_s"] and load_stats["p95_s"] else None,
        "p50_ratio": round(load_stats["p50_s"] / idle_stats["p50_s"], 2)
        if idle_stats["p50_s"] and load_stats["p50_s"] else None,
        "bulk_pages": per_job * args.backlog_jobs,
        "bulk_jobs": args.backlog_jobs,
        "bulk_pages_per_s": round((end_done - start_done) / (t1 - t0), 3),
        "bulk_engine_page_equivalents_per_s": round((tokens1 - tokens0) / args.tokens / (t1 - t0), 3)
        if tokens0 is not None and tokens1 is not None else None,
        "window_s": round(t1 - t0, 1),
        "bulk_left_at_window_end": left,
        "backlog_drained": left == 0,
        "bulk_canceled": canceled,
        "interval_s": args.interval,
        "warmup_s": args.warmup,
    }


def defaults() -> tuple[str, str | None, dict | None]:
    """API URL, key and layout that deploy/gpu/stack.sh recorded, if any."""
    stack = SVC_HOME / "stack"
    info = json.loads((stack / "stack.json").read_text()) if (stack / "stack.json").exists() else None
    key = (stack / "api_key").read_text().strip() if (stack / "api_key").exists() else None
    return (info or {}).get("api_url", "http://127.0.0.1:8000"), key, info


def main(argv: list[str] | None = None) -> int:
    url, key, info = defaults()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["e2e", "lanes"])
    parser.add_argument("--url", default=url, help="the ocrq API")
    parser.add_argument("--key", default=os.environ.get("OCRQ_API_KEY") or key)
    parser.add_argument("--tokens", type=int, default=(info or {}).get("tokens", 1000),
                        help="tokens each page generates (the stack's; also the direct run's)")
    parser.add_argument("--pages", type=int, default=256, help="e2e: pages in all")
    parser.add_argument("--pages-per-job", type=int, default=1, help="e2e: pages per job (>1: multi-page documents)")
    parser.add_argument("--doc-format", choices=["tiff", "pdf"], default="tiff", help="multi-page document format")
    parser.add_argument("--priority", choices=["bulk", "interactive"], default="bulk", help="e2e: the jobs' lane")
    parser.add_argument("--submitters", type=int, default=8, help="parallel POST /jobs")
    parser.add_argument("--poll", type=float, default=0.5, help="e2e: seconds between polling rounds")
    parser.add_argument("--direct-url", help="e2e: also drive this engine directly (gpu_raw http) on the same pages")
    parser.add_argument("--direct-when", choices=["before", "after"], default="after")
    parser.add_argument("--direct-concurrency", type=int, default=512)
    parser.add_argument("--direct-plain", action="store_true",
                        help="e2e: the direct half as before: pre-encoded pages, no logprobs, no orientation")
    parser.add_argument("--model", default=os.environ.get("OCRQ_ENGINE_MODEL", gpu_raw.MODEL))
    parser.add_argument("--idle", type=int, default=10, help="lanes: interactive pages timed on the idle stack")
    parser.add_argument("--backlog", type=int, default=2000, help="lanes: bulk pages queued behind them")
    parser.add_argument("--backlog-jobs", type=int, default=20, help="lanes: jobs the backlog is split into")
    parser.add_argument("--duration", type=float, default=60.0, help="lanes: seconds of interactive pages under load")
    parser.add_argument("--interval", type=float, default=1.0, help="lanes: seconds between interactive pages")
    parser.add_argument("--warmup", type=float, default=15.0, help="lanes: seconds between the split and timing")
    parser.add_argument("--lane-poll", type=float, default=0.05, help="lanes: seconds between polls of a page")
    parser.add_argument("--lane-wait", type=float, default=600.0,
                        help="lanes: seconds to wait after the window for the last interactive pages")
    parser.add_argument("--bulk-engine-url", help="lanes: also read the bulk engine's generated tokens over the window")
    parser.add_argument("--keep-backlog", action="store_true", help="lanes: do not cancel the bulk jobs at the end")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for jobs")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not args.key:
        parser.error("no API key: --key, OCRQ_API_KEY, or deploy/gpu/stack.sh's stack/api_key")

    api = Api(args.url, args.key, connections=max(16, args.submitters * 2))
    result = run_e2e(args, api) if args.mode == "e2e" else run_lanes(args, api)
    if info:
        result["stack"] = info
    gpu_raw.emit(result, args.out)
    failed = result.get("jobs_failed", 0) or result.get("interactive_loaded", {}).get("failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
