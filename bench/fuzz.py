"""A schemathesis campaign over every route of a running `ocrq serve`, for a number of calls or minutes.

Starts `ocrq serve` on the embedded default (rate limit off), submits one real job so that routes naming a job
or batch also meet real ids, then sends generated requests, positive and negative by turns, operation after
operation, until --calls or --minutes. Counts the answers by status class, every 5xx (with a curl to replay it),
calls that timed out, and the unhandled errors the server logged. Host names resolve nowhere in the server's
processes (a sitecustomize on PYTHONPATH), so no generated URL leaves the machine.

    nice -n 10 .venv/bin/python bench/fuzz.py --calls 20000 --minutes 60
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.documents.hostile import text_pdf  # noqa: E402
from tests.support.embedded import EmbeddedServer  # noqa: E402

NO_DNS = f"""import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.support.no_dns import install
install()
"""
UNHANDLED = re.compile(r"unhandled error|Traceback \(most recent call last\)")


def seed(server: EmbeddedServer, folder: Path) -> dict[str, str]:
    """One finished job of the campaign's tenant, whose id the keyed routes are given half the time."""
    headers = {"Authorization": f"Bearer {server.key}"}
    pdf = text_pdf(folder / "seed.pdf", ["A seeded page for the campaign."], page_size=(612, 160))
    job_id = httpx.post(f"{server.url}/jobs", headers=headers,
                        files={"file": ("seed.pdf", pdf.read_bytes())}).json()["id"]
    deadline = time.monotonic() + 300
    while httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json()["status"] not in ("succeeded", "failed"):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {"job_id": job_id}


def campaign(server: EmbeddedServer, *, calls: int, minutes: float, per_round: int, known: dict[str, str]) -> dict:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    headers = {"Authorization": f"Bearer {server.key}"}
    tally, by_operation, failures, timeouts = Counter(), Counter(), [], Counter()
    deadline = time.monotonic() + minutes * 60
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    rounds = 0
    while sum(tally.values()) < calls and time.monotonic() < deadline:
        mode = modes[rounds % 2]
        rounds += 1
        for operation in operations:
            if sum(tally.values()) >= calls or time.monotonic() >= deadline:
                break

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(max_examples=per_round, deadline=None, database=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            def call(case):
                for name in (case.path_parameters or {}):
                    if name in known and random.random() < 0.5:
                        case.path_parameters[name] = known[name]
                try:
                    response = case.call(headers=headers, base_url=server.url, timeout=15)
                except Exception as exc:  # noqa: BLE001 (a dropped connection is a finding as much as a 5xx)
                    timeouts[f"{case.operation.label}: {exc.__class__.__name__}"] += 1
                    tally["no answer"] += 1
                    return
                tally[f"{response.status_code // 100}xx"] += 1
                by_operation[case.operation.label] += 1
                if response.status_code >= 500:
                    failures.append((response.status_code, case.as_curl_command(headers=headers)))

            try:
                call()
            except Unsatisfiable:
                pass
    return {"tally": tally, "by_operation": by_operation, "failures": failures, "no_answer": timeouts,
            "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--per-round", type=int, default=25, help="examples per operation and mode in one round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ocrq-fuzz-") as tmp:
        tmp = Path(tmp)
        (tmp / "nodns").mkdir()
        (tmp / "nodns" / "sitecustomize.py").write_text(NO_DNS)
        pythonpath = os.pathsep.join(filter(None, [str(tmp / "nodns"), os.environ.get("PYTHONPATH")]))
        env = {"OCRQ_RATE_LIMIT_RPS": "0", "PYTHONPATH": pythonpath}
        with EmbeddedServer(tmp / "home", extra_env=env) as server:
            known = seed(server, tmp)
            started = time.monotonic()
            found = campaign(server, calls=args.calls, minutes=args.minutes, per_round=args.per_round, known=known)
            elapsed = time.monotonic() - started
            log = server.log.read_text(errors="replace")
        unhandled = [line for line in log.splitlines() if UNHANDLED.search(line)]
    total = sum(found["tally"].values())
    print(f"calls: {total} in {elapsed / 60:.1f} min ({total / elapsed:.1f}/s), {found['rounds']} rounds, "
          f"{len(found['by_operation'])} operations")
    print("answers:", dict(sorted(found["tally"].items())))
    print("per operation:", dict(sorted(found["by_operation"].items())))
    print(f"5xx: {len(found['failures'])}; no answer: {sum(found['no_answer'].values())}; "
          f"unhandled errors in the server's log: {len(unhandled)}")
    for what, n in found["no_answer"].items():
        print(f"  no answer x{n}: {what}")
    for status, curl in found["failures"]:
        print(f"  {status}: {curl}")
    for line in unhandled[:50]:
        print(f"  log: {line}")


if __name__ == "__main__":
    main()
