"""`ocrq bench` against `ocrq serve`: real jobs, a pages/s figure that adds up, and errors a person can act on."""

from __future__ import annotations

import json
import re

import httpx
from typer.testing import CliRunner

from cli.main import app
from tests.support.servers import free_port


def bench(*args: str):
    return CliRunner().invoke(app, ["bench", *args])


def test_bench_reports_pages_per_second(embedded_server, samples):
    result = bench(str(samples / "typewriter.png"), "-n", "2", "--json", "--url", embedded_server.url,
                   "--key", embedded_server.key)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["jobs"], report["pages"], report["pages_failed"], report["jobs_failed"]) == (2, 2, 0, 0)
    assert report["pages_per_s"] == round(2 / report["seconds"], 3) > 0
    # The API's /metrics shows the worker's own observations of those pages (merged from its metrics files).
    metrics = httpx.get(f"{embedded_server.url}/metrics").text
    count = re.search(r'^ocrq_page_engine_seconds_count\{engine="cpu"\} (\S+)$', metrics, re.MULTILINE)
    assert count and float(count.group(1)) >= 2, metrics


def test_bench_explains_an_unreachable_server_and_a_refused_key(embedded_server, samples):
    gone = bench(str(samples / "linn.png"), "--url", f"http://127.0.0.1:{free_port()}", "--key", "k")
    assert gone.exit_code == 2 and "cannot reach ocrq" in gone.output
    refused = bench(str(samples / "linn.png"), "--url", embedded_server.url, "--key", "ocrq_wrong")
    assert refused.exit_code == 2 and "API key was refused" in refused.output
