"""Queue overhead of the embedded default, measured side by side in one run.

(a) the CPU engine called directly on the N pages, in this process: each page rendered (decoded,
    normalised, capped at 1540 px, as the worker does) and read, one after the other; the engine-only
    time on pre-rendered pages is printed beside it;
(b) the same files submitted to a running `ocrq serve` (SQLite, filesystem broker, local storage),
    timed from the first submit to the last result.
b/a is the share of the direct throughput that survives the queue: API, storage, broker, database.
Also: submit-to-start latency of a one-page job on the idle stack.

    .venv/bin/python bench/embedded.py --pages 24 --mode images   # N one-page image jobs
    .venv/bin/python bench/embedded.py --pages 50 --mode pdf      # one N-page PDF job
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.documents import Limits, render_page  # noqa: E402
from tests.documents.hostile import text_page  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402
from worker.engines.cpu import CpuEngine  # noqa: E402

SAMPLES = ROOT / "tests" / "samples"
PARAGRAPH = ("Invoice 2026-{n:04d}. The goods listed below were delivered on the date shown and are payable "
             "within thirty days. Please quote the invoice number with your payment. ")


def make_pages(folder: Path, count: int) -> list[Path]:
    """Alternate real scans with rendered text pages, saved as PNG files."""
    sources = [Image.open(SAMPLES / "linn.png"), Image.open(SAMPLES / "typewriter.png")]
    paths = []
    for n in range(count):
        image = sources[n % 2] if n % 3 else text_page(PARAGRAPH.format(n=n) * 6, font_size=30)
        path = folder / f"page{n:03d}.png"
        image.save(path)
        paths.append(path)
    return paths


def direct(engine: CpuEngine, pages: list[tuple[Path, int]], limits: Limits) -> tuple[float, float]:
    """Seconds to render and read every page, and seconds spent in the engine alone."""
    in_engine = 0.0
    started = time.perf_counter()
    for path, index in pages:
        image = render_page(path, index, limits=limits).image
        t0 = time.perf_counter()
        engine.read([image])
        in_engine += time.perf_counter() - t0
    return time.perf_counter() - started, in_engine


def wait(client: httpx.Client, job_ids: list[str], *, interval: float = 0.5) -> list[dict]:
    """Poll one job at a time (jobs finish roughly in order) every `interval` s, as `ocrq submit --wait` does."""
    jobs = []
    for job_id in job_ids:
        while (body := client.get(f"/jobs/{job_id}").raise_for_status().json())["status"] not in (
                "succeeded", "failed", "canceled"):
            time.sleep(interval)
        jobs.append(body)
    return jobs


def through_stack(client: httpx.Client, uploads: list[Path]) -> float:
    started = time.perf_counter()
    ids = []
    for path in uploads:
        with path.open("rb") as body:
            response = client.post("/jobs", files={"file": (path.name, body)})
        response.raise_for_status()
        ids.append(response.json()["id"])
    jobs = wait(client, ids)
    elapsed = time.perf_counter() - started
    failed = [j for j in jobs if j["status"] != "succeeded" or j["pages_failed"]]
    if failed:
        raise SystemExit(f"{len(failed)} jobs failed: {failed[0]}")
    return elapsed


def idle_latency(client: httpx.Client, page: Path, repeats: int) -> list[float]:
    """Seconds from the submit request to the job's started_at, one job at a time on an idle stack."""
    out = []
    for _ in range(repeats):
        sent = datetime.now().astimezone()
        with page.open("rb") as body:
            job_id = client.post("/jobs", files={"file": (page.name, body)}).json()["id"]
        [job] = wait(client, [job_id], interval=0.05)
        out.append((datetime.fromisoformat(job["started_at"]) - sent).total_seconds())
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--mode", choices=["images", "pdf"], default="images")
    parser.add_argument("--latency-repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        pages = make_pages(folder, args.pages)
        limits = Limits()
        if args.mode == "pdf":
            pdf = folder / "doc.pdf"
            Image.open(pages[0]).convert("RGB").save(pdf, "PDF", save_all=True, resolution=140,
                                                     append_images=[Image.open(p).convert("RGB") for p in pages[1:]])
            uploads, work = [pdf], [(pdf, i) for i in range(args.pages)]
        else:
            uploads, work = pages, [(p, 0) for p in pages]
        engine = CpuEngine()
        a, in_engine = direct(engine, work, limits)
        engine.close()
        with EmbeddedServer(folder / "home") as server:
            client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
            latency = idle_latency(client, pages[0], args.latency_repeats)
            b = through_stack(client, uploads)
    print("| mode | pages | (a) direct s | of which engine s | (a) pages/s | (b) embedded stack s | (b) pages/s "
          "| b/a |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.mode} | {args.pages} | {a:.1f} | {in_engine:.1f} | {args.pages / a:.3f} | {b:.1f} "
          f"| {args.pages / b:.3f} | {a / b:.3f} |")
    print(f"submit-to-start latency at idle: median {statistics.median(latency) * 1000:.0f} ms "
          f"(min {min(latency) * 1000:.0f}, max {max(latency) * 1000:.0f}, n={len(latency)})")


if __name__ == "__main__":
    main()
