"""The trace file of the embedded default and `ocrq trace JOB_ID`, and tracing off when nothing asks for it."""

from __future__ import annotations

import os
import subprocess
import sys

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from typer.testing import CliRunner

from cli.main import app
from cli.trace import job_spans, timeline
from common import tracing
from common.settings import get_settings
from tests.support.stack import ROOT


def _tracer(path, service):
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(tracing.file_exporter(path)))
    return provider.get_tracer("test")


def test_ocrq_trace_prints_the_jobs_spans_under_their_parents(tmp_path, monkeypatch):
    path = tmp_path / "traces.jsonl"
    api, worker = _tracer(path, "ocrq-api"), _tracer(path, "ocrq-worker")
    with api.start_as_current_span("POST /jobs", attributes={"ocrq.job": "j1"}):
        with worker.start_as_current_span("run/ocrq.ocr_page", attributes={"ocrq.job": "j1", "ocrq.page": 1}):
            with worker.start_as_current_span("engine.read"):
                pass
    with api.start_as_current_span("POST /jobs", attributes={"ocrq.job": "j2"}):
        pass
    with path.open("a") as file:
        file.write('{"cut short')  # a process killed mid-line

    # No descriptor of the file stays open: a forked child that closes inherited descriptors (Celery's beat) must
    # not leave a number that a later open() takes and spans then go to.
    assert str(path) not in {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}

    lines = timeline(job_spans(path, "j1"))
    assert lines[0].split() == ["start", "ms", "took", "ms", "span"]
    assert [line[22:] for line in lines[1:]] == [
        "POST /jobs  [ocrq-api]", "  run/ocrq.ocr_page  [ocrq-worker]  page=1", "    engine.read  [ocrq-worker]"]

    monkeypatch.setenv("OCRQ_TRACE_FILE", str(path))
    get_settings.cache_clear()
    try:
        printed = CliRunner().invoke(app, ["trace", "j2"])
        assert printed.exit_code == 0 and "POST /jobs  [ocrq-api]" in printed.output
        assert "ocr_page" not in printed.output
        missing = CliRunner().invoke(app, ["trace", "nope"])
        assert missing.exit_code == 1 and "no span of job nope" in missing.output
    finally:
        get_settings.cache_clear()


def test_without_otel_variables_or_a_trace_file_nothing_is_traced(tmp_path):
    code = ("import sys; from opentelemetry import trace; from api.app import create_app; create_app(); "
            "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'; "
            "assert not [m for m in sys.modules if m.startswith('opentelemetry.instrumentation.')], 'instrumented'")
    env = {"PATH": "/usr/bin:/bin", "OCRQ_HOME": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert not tracing.otlp_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                                       "OTEL_TRACES_EXPORTER": "none"})
    assert tracing.otlp_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
