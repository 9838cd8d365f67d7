"""What tracing costs the embedded default, side by side in one run: `ocrq serve` of the tree before (a git ref,
unpacked with `git archive`), of this tree with tracing off, and of this tree with tracing on (every span written
to OCRQ_TRACE_FILE by the SDK's batch processor), in rotating order, each submitting the same one-page jobs of
bench/embedded.py and timed from the first submit to the last result.

    nice -n 10 .venv/bin/python bench/tracing_cost.py --before main --pages 6 --rounds 3
    nice -n 10 .venv/bin/python bench/tracing_cost.py --before main --rounds 10 --variants before,off
    .venv/bin/python bench/tracing_cost.py --calls   # what ocrq's own tracing calls cost a page when off
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedded import make_pages, through_stack  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402


def unpack(ref: str, folder: Path) -> Path:
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run_once(root: Path, home: Path, uploads: list[Path], env: dict[str, str]) -> float:
    with EmbeddedServer(home, extra_env=env, root=root) as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
        through_stack(client, uploads[:1])  # the worker's first page loads the models
        return through_stack(client, uploads)


def calls_per_page(repeat: int = 20000) -> float:
    """Microseconds of the tracing calls the page path makes for one page (its annotate, the render, engine and
    write spans, the engine URL), with tracing off as in this process: no provider, no instrumentation."""
    from common import tracing

    def one_page() -> None:
        tracing.annotate(job="j", page=1, tenant="t", lane="bulk", attempt=1, bucket="b")
        with tracing.span("render", job="j", page=1):
            pass
        with tracing.span("engine.read", engine="cpu", pages=1):
            tracing.annotate(engine_url=None)
        with tracing.span("write", job="j", page=1):
            pass

    runs = [timeit.timeit(one_page, number=repeat) / repeat * 1e6 for _ in range(5)]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", action="store_true", help="only time the tracing calls of one page, off")
    parser.add_argument("--before", default="main", help="git ref of the tree before")
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="before,off,on", help="which of before, off and on to run")
    args = parser.parse_args()
    if args.calls:
        print(f"tracing calls of one page, tracing off: {calls_per_page():.1f} µs (median of 5 × 20,000)")
        return
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        uploads = make_pages(folder, args.pages)
        before = unpack(args.before, folder / "before")
        variants = {"before": (before, {}), "off": (ROOT, {}),
                    "on": (ROOT, {"OCRQ_TRACE_FILE": str(folder / "traces.jsonl")})}
        variants = {name: variants[name] for name in args.variants.split(",")}
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                root, env = variants[name]
                seconds[name].append(run_once(root, folder / f"home-{name}-{round_}", uploads, env))
                print(f"round {round_ + 1} {name}: {seconds[name][-1]:.1f} s", file=sys.stderr, flush=True)
        spans = sum(1 for _ in (folder / "traces.jsonl").open()) if (folder / "traces.jsonl").exists() else 0
    median = {name: statistics.median(values) for name, values in seconds.items()}
    # Each round's ratio to that round's run of the tree before, whose median holds when the machine's speed
    # drifts between rounds.
    print("| variant | runs (s) | median s | pages/s | throughput vs before (medians) | paired, median of rounds |")
    print("|---|---|---|---|---|---|")
    for name, values in seconds.items():
        paired = [b / v for b, v in zip(seconds.get("before", []), values, strict=False)]
        print(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {median[name]:.1f} "
              f"| {args.pages / median[name]:.3f} | {median.get('before', float('nan')) / median[name]:.3f} "
              f"| {statistics.median(paired) if paired else float('nan'):.3f} |")
    print(f"spans written with tracing on: {spans} ({spans / max(args.rounds, 1):.0f} a run of {args.pages} pages)")


if __name__ == "__main__":
    main()
