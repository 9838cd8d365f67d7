"""How the bulk GPU worker feeds an engine: the whole stack against the engine driven directly, on a stand-in for
vLLM's continuous batching, so the worker's side can be measured without a GPU.

Usage: .venv/bin/python -m bench.feed [--pages 192] [--slots 32] [--service-s 3] [--submitters 4]
                                      [--config 8x4@0.25 --config 16x4@2 ...] [--out feed.json]

The stand-in engine answers vLLM's `/v1/chat/completions`: at most --slots requests run at once, each for
--service-s seconds, the rest wait in arrival order (as vLLM's scheduler with max_num_seqs does). It records when
each request arrived, started and ended, so the bench reports how many ran at once over time. Direct: --pages
requests kept --slots in flight, a new one as one ends (bench/gpu_raw.py's driver against vLLM). Stack: a private
Postgres, Redis and SeaweedFS, the API in process, one CPU worker splitting jobs (`ocrq.control`,
`ocrq.prepare.bulk`), and for each config one `ocrq worker --gpu --lane bulk` on the bulk GPU queues; --pages
single-page PNG jobs (priority bulk) sent by --submitters threads, timed from the first submit to the last page
written; the CPU worker runs the sweepers' schedule, and read_again counts pages claimed more than once. A config
is PROCESSESxPAIR@WAIT[:POOL]: --concurrency PROCESSES, OCRQ_ENGINE_PAIR_SIZE=PAIR, OCRQ_ENGINE_BATCH_WAIT_S=WAIT
and --pool POOL (default prefork). The engine is the edge this bench replaces; everything else is the real stack.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI, Request
from PIL import Image, ImageDraw
from sqlalchemy import func, select

from common.db import Database
from common.jobs.models import Page
from common.queue.names import CONTROL_QUEUE, PREPARE_BULK_QUEUE, gpu_worker_queues
from tests.support.live_server import live_server
from tests.support.private_services import private_services
from tests.support.stack import Stack

KEY = "ocrq_bench_feed_key_0000000000000000000"
MODEL = "feed-stand-in"


class SlotEngine:
    """vLLM's scheduling as the worker sees it: `slots` sequences at once, each `service_s`, FIFO for the rest."""

    def __init__(self, *, slots: int, service_s: float) -> None:
        self.slots, self.service_s = slots, service_s
        self.requests: list[tuple[float, float, float]] = []  # (arrived, started, ended), monotonic
        self.url = ""

    def app(self) -> FastAPI:
        app = FastAPI()
        gate: dict[str, asyncio.Semaphore] = {}

        @app.get("/v1/models")
        async def models() -> dict:
            return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench", "created": 0}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict:
            arrived = time.monotonic()
            await request.body()
            slots = gate.setdefault("slots", asyncio.Semaphore(self.slots))
            async with slots:
                started = time.monotonic()
                await asyncio.sleep(self.service_s)
                ended = time.monotonic()
            self.requests.append((arrived, started, ended))
            return {"id": "feed", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "feed bench page"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}

        return app

    @contextmanager
    def serving(self) -> Iterator[SlotEngine]:
        """This engine on loopback (tests/support/live_server) until the block ends."""
        with live_server(self.app()) as url:
            self.url = url
            yield self

    def window(self, start: float, end: float) -> dict:
        """How busy the slots were between start and end: mean running, and the share of time all were busy."""
        done = [r for r in self.requests if r[2] > start and r[1] < end]
        step, t, running, full = 0.1, start, [], 0
        while t < end:
            n = sum(1 for _, s, e in done if s <= t < e)
            running.append(n)
            full += n >= self.slots
            t += step
        waits = [s - a for a, s, _ in done]
        return {"mean_running": round(statistics.mean(running), 1) if running else 0.0,
                "share_all_slots_busy": round(full / len(running), 3) if running else 0.0,
                "engine_queue_wait_p50_s": round(statistics.median(waits), 2) if waits else None}


def page_png(n: int) -> bytes:
    image = Image.new("RGB", (850, 1100), "white")
    ImageDraw.Draw(image).text((80, 80), f"feed bench page {n}", fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def direct(engine: SlotEngine, pages: int) -> dict:
    """--pages requests, `slots` in flight, a new one as one ends."""
    async def drive() -> float:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "page"}], "max_tokens": 8}
        gate = asyncio.Semaphore(engine.slots)
        async with httpx.AsyncClient(timeout=600) as client:
            async def one() -> None:
                async with gate:
                    (await client.post(f"{engine.url}/v1/chat/completions", json=body)).raise_for_status()

            start = time.monotonic()
            await asyncio.gather(*(one() for _ in range(pages)))
            return start

    start = asyncio.run(drive())
    end = time.monotonic()
    return {"pages": pages, "wall_s": round(end - start, 2), "pages_per_s": round(pages / (end - start), 3),
            **engine.window(start, end)}


def through_stack(stack: Stack, db: Database, engine: SlotEngine, *, config: str, pages: int,
                  submitters: int) -> dict:
    sizes, _, pool = config.partition(":")
    processes, rest = sizes.split("x")
    pair, wait = rest.split("@")
    worker = stack.start_worker(
        "--gpu", "--lane", "bulk", "--queues", ",".join(gpu_worker_queues("bulk")), "--concurrency", processes,
        "--pool", pool or "prefork",
        extra_env={"OCRQ_ENGINE_PAIR_SIZE": pair, "OCRQ_ENGINE_BATCH_WAIT_S": wait}, timeout=180)
    try:
        with db.session() as session:
            before = session.scalar(select(func.count()).select_from(Page).where(Page.status == "succeeded"))
            again_before = session.scalar(select(func.count()).select_from(Page).where(Page.attempts > 1))
        client = stack.client(KEY)
        bodies = [page_png(n) for n in range(8)]
        start = time.monotonic()

        def submit(n: int) -> None:
            response = client.post("/jobs", files={"file": (f"p{n}.png", bodies[n % len(bodies)], "image/png")},
                                   data={"priority": "bulk", "output": "markdown"})
            response.raise_for_status()

        with ThreadPoolExecutor(submitters) as pool:
            list(pool.map(submit, range(pages)))
        submitted = time.monotonic() - start
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            with db.session() as session:
                done = session.scalar(select(func.count()).select_from(Page).where(
                    Page.status.in_(("succeeded", "failed")))) - before
            if done >= pages:
                break
            time.sleep(0.2)
        end = time.monotonic()
        with db.session() as session:
            failed = session.scalar(select(func.count()).select_from(Page).where(Page.status == "failed"))
            again = session.scalar(select(func.count()).select_from(Page).where(Page.attempts > 1)) - again_before
    finally:
        worker.stop()
    return {"config": config, "pages": pages, "done": done, "failed": failed, "read_again": again,
            "submit_s": round(submitted, 2),
            "wall_s": round(end - start, 2), "pages_per_s": round(pages / (end - start), 3),
            **engine.window(start, end)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=192)
    parser.add_argument("--slots", type=int, default=32, help="the stand-in engine's max_num_seqs")
    parser.add_argument("--service-s", type=float, default=3.0, help="seconds each page runs once admitted")
    parser.add_argument("--submitters", type=int, default=4)
    parser.add_argument("--config", action="append", help="PROCESSESxPAIR@WAIT, repeatable")
    parser.add_argument("--out", type=Path, default=Path("feed.json"))
    args = parser.parse_args()
    configs = args.config or ["8x4@0.25", "16x4@2"]
    work = Path(tempfile.mkdtemp(prefix="ocrq-feed-"))
    (work / "logs").mkdir()
    result: dict = {"command": " ".join(["python -m bench.feed", *sys.argv[1:]]), "machine": platform.node(),
                    "slots": args.slots, "service_s": args.service_s, "work_dir": str(work), "runs": []}
    with SlotEngine(slots=args.slots, service_s=args.service_s).serving() as engine, private_services(
            work, tenant="feed", api_key=KEY, rate_limit_rps=0, engine="vllm", engine_urls=[engine.url],
            engine_model=MODEL, engine_timeout_s=600, stale_requeue_after_s=900, log_format="json") as services:
        db = Database(services.settings.resolved_database_url)
        with Stack(services.settings, logs=work / "logs") as stack:
            # With the sweepers' schedule, as a deployment runs: a page they put back is read twice (read_again).
            stack.start_worker("--queues", f"{CONTROL_QUEUE},{PREPARE_BULK_QUEUE}", "--concurrency", "2", "--beat",
                               timeout=180)
            for config in configs:
                pair = {"direct": direct(engine, args.pages)}
                pair["stack"] = through_stack(stack, db, engine, config=config, pages=args.pages,
                                              submitters=args.submitters)
                pair["stack_over_direct"] = round(pair["stack"]["pages_per_s"] / pair["direct"]["pages_per_s"], 3)
                result["runs"].append(pair)
                print(json.dumps(pair), flush=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"result: {args.out}")


if __name__ == "__main__":
    main()
