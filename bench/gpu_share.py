"""Engines sharing one GPU's weights: memory, output equality, and what a killed holder does.

    python bench/gpu_share.py memory   --urls http://127.0.0.1:8100,http://127.0.0.1:8101 --label shared-2
    python bench/gpu_share.py equality --urls http://127.0.0.1:8100,http://127.0.0.1:8101 --pages 4 --tokens 64
    python bench/gpu_share.py equality --urls http://127.0.0.1:8100 --greedy --save bf16.json    # one engine now,
    python bench/gpu_share.py equality --urls http://127.0.0.1:8100 --greedy --against bf16.json # another later
    python bench/gpu_share.py kill-holder --urls ... [--api http://127.0.0.1:8000 --key KEY --jobs 20]

Each run prints one JSON line and appends it to --out. `memory` reads nvidia-smi (the whole card and each
process) and each engine's /ocrq/weights; `equality` sends the same pages with the same seed to each engine,
one request at a time, and compares the generated token ids (`--save` keeps the first engine's, `--against`
compares with ones kept by an engine that ran before: fp8 against bf16 KV, say); `kill-holder` SIGKILLs the holder engine's
engine-core process, times until every engine serves again, and (with --api) checks that jobs submitted
just before and during the outage all succeed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_e2e import Api, page_png, wait_all
from gpu_raw import MODEL, PAGE, data_url, emit, make_page, payload


def weights(url: str) -> dict | None:
    try:
        response = httpx.get(f"{url}/ocrq/weights", timeout=3)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def serving(url: str, model: str) -> bool:
    try:
        response = httpx.get(f"{url}/v1/models", timeout=3)
        return response.status_code == 200 and any(m["id"] == model for m in response.json()["data"])
    except (httpx.HTTPError, ValueError, KeyError):
        return False


def nvidia_smi() -> dict:
    def query(what: str, fields: str) -> list[list[str]]:
        out = subprocess.run(["nvidia-smi", f"--query-{what}={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return [[v.strip() for v in line.split(",")] for line in out.strip().splitlines() if line.strip()]

    (used, total), *_ = query("gpu", "memory.used,memory.total")
    processes = {int(pid): int(mib) for pid, mib in query("compute-apps", "pid,used_memory")}
    return {"used_mib": int(used), "total_mib": int(total), "processes_mib": processes}


def torch_free() -> dict | None:
    """torch.cuda.mem_get_info from a fresh process (its own CUDA context is part of 'used')."""
    code = "import json, torch; f, t = torch.cuda.mem_get_info(); print(json.dumps([f, t]))"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        free, total = json.loads(out.stdout.strip().splitlines()[-1])
        return {"free_gib": round(free / 2**30, 3), "used_gib": round((total - free) / 2**30, 3)}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def run_memory(args: argparse.Namespace) -> dict:
    smi = nvidia_smi()
    engines = []
    for url in args.urls:
        state = weights(url) or {}
        pid = state.get("engine_pid")
        engines.append({"url": url, "role": state.get("role"), "lane": state.get("lane"), "engine_pid": pid,
                        "process_mib": smi["processes_mib"].get(pid), "shared_bytes": state.get("shared_bytes"),
                        "weight_bytes_allocated": state.get("weight_bytes_allocated"),
                        "kv_cache_bytes": state.get("kv_cache_bytes")})
    return {"mode": "memory", "label": args.label, "engines": engines, "gpu_used_mib": smi["used_mib"],
            "gpu_total_mib": smi["total_mib"], "processes_mib": smi["processes_mib"], "torch": torch_free()}


def _tokens(url: str, body: dict) -> list[int]:
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    return response.json()["choices"][0]["token_ids"]


def run_equality(args: argparse.Namespace) -> dict:
    pages = [data_url(make_page(PAGE, seed=i)) for i in range(args.pages)]
    sampling = {"temperature": 0.0, "top_p": 1.0} if args.greedy else {}
    kept = json.loads(args.against.read_text()) if args.against else None
    compared, first_outputs = [], []
    for i, page in enumerate(pages):
        body = payload(model=args.model, url=page, tokens=args.tokens, **sampling) | {
            "seed": args.seed, "return_token_ids": True}
        outputs = [_tokens(url, body) for url in args.urls]
        if kept is not None:
            outputs.insert(0, kept["outputs"][i])
        first = outputs[0]
        first_outputs.append(first)
        mismatch = [first_mismatch(first, other) for other in outputs[1:]]
        compared.append({"page": i, "tokens": len(first), "equal": all(o == first for o in outputs[1:]),
                         "first_mismatch": mismatch, "head": first[:8]})
    if args.save:
        args.save.write_text(json.dumps({"label": args.label, "urls": args.urls, "outputs": first_outputs}))
    agreed = [m for c in compared for m in c["first_mismatch"]]
    return {"mode": "equality", "label": args.label, "urls": args.urls, "seed": args.seed, "tokens": args.tokens,
            "greedy": args.greedy, "against": kept["label"] if kept else None, "pages": compared,
            "all_equal": all(c["equal"] for c in compared),
            "agreeing_prefix": sorted(args.tokens if m is None else m for m in agreed)}


def first_mismatch(a: list[int], b: list[int]) -> int | None:
    """The first position where two token sequences differ; None when they are equal."""
    if a == b:
        return None
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def run_kill_holder(args: argparse.Namespace) -> dict:
    states = {url: weights(url) or {} for url in args.urls}
    holder_url = next((u for u, s in states.items() if s.get("role") == "holder"), None)
    if holder_url is None:
        raise SystemExit(f"no engine reports role=holder: {states}")
    api = Api(args.api, args.key) if args.api else None

    def submit(count: int) -> None:
        for _ in range(count):
            priority = "bulk" if len(jobs) % 2 else "interactive"
            jobs.append(api.submit(page_png(len(jobs)), fmt="png", priority=priority, name=f"k{len(jobs)}")[0])

    jobs: list[str] = []
    if api:
        submit(args.jobs // 2)
    killed_at = time.monotonic()
    os.kill(states[holder_url]["engine_pid"], signal.SIGKILL)
    down_at: dict[str, float] = {}
    back_at: dict[str, float] = {}
    while time.monotonic() - killed_at < args.timeout and len(back_at) < len(args.urls):
        for url in args.urls:
            up = serving(url, args.model)
            if not up and url not in down_at:
                down_at[url] = time.monotonic() - killed_at
            if up and url in down_at and url not in back_at:
                back_at[url] = time.monotonic() - killed_at
        if api and len(jobs) < args.jobs:
            submit(1)
        time.sleep(0.5)
    after = {url: weights(url) for url in args.urls}
    outcome = {}
    if api:
        final = wait_all(api, jobs, interval=1.0, timeout=args.timeout)
        statuses = [final[job_id]["status"] for job_id in jobs]
        outcome = {"submitted": len(jobs), "succeeded": statuses.count("succeeded"),
                   "failed": statuses.count("failed"),
                   "unfinished": sum(s not in ("succeeded", "failed", "canceled") for s in statuses)}
    return {"mode": "kill-holder", "label": args.label, "holder": holder_url,
            "down_after_s": {u: round(v, 1) for u, v in down_at.items()},
            "serving_again_after_s": {u: round(v, 1) for u, v in back_at.items()},
            "roles_after": {u: (s or {}).get("role") for u, s in after.items()}, "jobs": outcome}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["memory", "equality", "kill-holder"])
    parser.add_argument("--urls", type=lambda v: [u.strip().rstrip("/") for u in v.split(",") if u.strip()],
                        default=["http://127.0.0.1:8100", "http://127.0.0.1:8101"])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--greedy", action="store_true", help="temperature 0 (else LightOn's 0.2 / top-p 0.9)")
    parser.add_argument("--save", type=Path, help="equality: keep the first engine's token ids here")
    parser.add_argument("--against", type=Path, help="equality: compare with token ids kept by --save")
    parser.add_argument("--api", default="")
    parser.add_argument("--key", default="")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=420.0)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    run = {"memory": run_memory, "equality": run_equality, "kill-holder": run_kill_holder}[args.mode]
    result = run(args)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
