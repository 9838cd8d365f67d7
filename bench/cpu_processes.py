"""The CPU engine's throughput as processes x threads: one process with every core's threads against one
process per core with one thread each, the same pages shared out, rounds alternated.

    .venv/bin/python bench/cpu_processes.py --corpus /tmp/corpus35 --pages 16 --rounds 2

Each process opens its engine before the clock starts, then takes the next page as it frees (as a
worker's pool children do); the time is until the last page is read.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


_engine = None


def _open(threads: int, opened, start) -> None:
    """Each process's engine, opened before the common start."""
    global _engine  # one engine per pool process
    sys.path.insert(0, str(ROOT))
    from worker.engines.cpu import CpuEngine

    _engine = CpuEngine(threads=threads)
    opened.put(os.getpid())
    start.wait()


def _read(path: str) -> None:
    from PIL import Image

    _engine.read([Image.open(path)])


def run(processes: int, threads: int, paths: list[str]) -> float:
    """Seconds from the common start until the pages are read, each page going to the next free process."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        opened, start = manager.Queue(), manager.Event()
        with context.Pool(processes, initializer=_open, initargs=(threads, opened, start)) as pool:
            pending = pool.map_async(_read, paths, chunksize=1)
            for _ in range(processes):
                opened.get(timeout=300)
            began = time.perf_counter()
            start.set()
            pending.get()
            return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    args = parser.parse_args()
    pages = json.loads((args.corpus / "index.json").read_text())["pages"][:args.pages]
    paths = [str(args.corpus / f"{page['name']}.png") for page in pages]
    print("| round | processes x threads | seconds | pages/s |\n|---|---|---|---|")
    for n in range(args.rounds):
        for processes, threads in ((1, args.cores), (args.cores, 1)):
            seconds = run(processes, threads, paths)
            print(f"| {n} | {processes} x {threads} | {seconds:.1f} | {len(paths) / seconds:.3f} |", flush=True)


if __name__ == "__main__":
    main()
