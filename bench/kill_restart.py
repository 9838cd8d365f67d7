"""The worker-kill tests, run again and again: how many pass, and how long from each kill until the held page
started again (each test records it as the JUnit property kill_to_restart_s).

    .venv/bin/python -m bench.kill_restart --runs 10
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TESTS = (
    "tests/recovery/test_held_messages.py",
    "tests/recovery/test_worker_crash.py::test_a_killed_workers_running_and_prefetched_pages_are_read_again_within_a_minute",
)


def run_once(tests: list[str], folder: Path) -> dict[str, tuple[bool, float | None, str]]:
    """Each test's outcome, kill_to_restart_s and failure message from one pytest run; its files stay in `folder`
    (the workers' logs under the test's temporary folders)."""
    report = folder / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    f"--basetemp={folder / 'tmp'}", *tests], capture_output=True, check=False)
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = next((case.find(kind) for kind in ("failure", "error") if case.find(kind) is not None), None)
        passed = failure is None and case.find("skipped") is None
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        waited = float(props["kill_to_restart_s"]) if "kill_to_restart_s" in props else None
        outcomes[case.get("name")] = (passed, waited, "" if failure is None else failure.get("message", "")[:300])
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("tests", nargs="*", default=list(TESTS))
    args = parser.parse_args()
    passes: dict[str, int] = defaultdict(int)
    waits: dict[str, list[float]] = defaultdict(list)
    folder = Path(tempfile.mkdtemp(prefix="ocrq-kill-restart-"))
    print(f"files in {folder}", flush=True)
    for n in range(args.runs):
        started = time.monotonic()
        (folder / f"run{n + 1}").mkdir()
        for name, (passed, waited, failure) in run_once(args.tests, folder / f"run{n + 1}").items():
            passes[name] += passed
            if waited is not None:
                waits[name].append(waited)
            print(f"run {n + 1}: {name}: {'pass' if passed else 'FAIL ' + failure}, kill to restart {waited} s",
                  flush=True)
        print(f"run {n + 1} took {time.monotonic() - started:.0f} s", flush=True)
    for name in sorted(passes):
        times = waits[name]
        print(f"{name}: {passes[name]}/{args.runs} passed; kill to restart median {statistics.median(times):.1f} s, "
              f"max {max(times):.1f} s, all {times}" if times else f"{name}: {passes[name]}/{args.runs} passed")


if __name__ == "__main__":
    main()
