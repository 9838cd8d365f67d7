"""`ocrq trace JOB_ID`: a job's timeline, from the spans appended to OCRQ_TRACE_FILE."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

JOB_ATTRIBUTE = "ocrq.job"
# The attributes worth a column: the rest are in the file.
SHOWN = ("ocrq.page", "ocrq.attempt", "ocrq.lane", "ocrq.bucket", "ocrq.engine_url", "http.route",
         "http.response.status_code", "db.operation.name", "rpc.method")


def job_spans(path: Path, job_id: str) -> list[dict]:
    """Every span of the traces that any span marks as the job's."""
    spans = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                spans.append(json.loads(line))
            except ValueError:  # a line cut short by a process killed while writing it
                continue
    traces = {s["context"]["trace_id"] for s in spans if s.get("attributes", {}).get(JOB_ATTRIBUTE) == job_id}
    return [s for s in spans if s["context"]["trace_id"] in traces]


def timeline(spans: list[dict]) -> list[str]:
    """One line a span, children under their parent in start order: offset and duration in ms, service, name."""
    if not spans:
        return []
    start = {id(s): _time(s["start_time"]) for s in spans}
    t0 = min(start.values())
    ids = {s["context"]["span_id"] for s in spans}
    below: dict[str | None, list[dict]] = {}
    for s in spans:
        below.setdefault(s["parent_id"] if s["parent_id"] in ids else None, []).append(s)
    lines = [f"{'start ms':>10} {'took ms':>9}  span"]

    def walk(parent: str | None, depth: int) -> None:
        for s in sorted(below.get(parent, []), key=lambda s: start[id(s)]):
            took = (_time(s["end_time"]) - start[id(s)]) * 1000
            service = s.get("resource", {}).get("attributes", {}).get("service.name", "?")
            attributes = s["attributes"]
            shown = " ".join(f"{k.removeprefix('ocrq.')}={attributes[k]}" for k in SHOWN if attributes.get(k) is not None)
            lines.append(f"{(start[id(s)] - t0) * 1000:>10.1f} {took:>9.1f}  {'  ' * depth}{s['name']}  [{service}]"
                         + (f"  {shown}" if shown else ""))
            walk(s["context"]["span_id"], depth + 1)

    walk(None, 0)
    return lines


def _time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
