"""OpenTelemetry traces: one trace per job, from POST /jobs through its pages to the webhook, across processes.

The maintained instrumentations make the spans (FastAPI, Celery, SQLAlchemy, httpx, botocore, Redis); Celery's
carries the trace context in each message's headers. ocrq adds only what no package sees: render, engine call,
write and result spans, and the job, page, tenant, lane, bucket, attempt and engine URL attributes.

Off unless the standard variables ask for an OTLP exporter (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER=otlp; OTLP over HTTP/protobuf), or OCRQ_TRACE_FILE names a
file to append spans to as JSON lines (`ocrq trace JOB_ID` reads it). Off, no tracer provider is installed, no
instrumentation is loaded, and every span below is the OpenTelemetry API's no-op.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry import trace

from common.settings import Settings

TRACER = "ocrq"
# Attribute names are these with the prefix: ocrq.job, ocrq.page, ocrq.tenant, ocrq.lane, ocrq.bucket, ...
PREFIX = "ocrq."
# Requests that say nothing about a job, and would fill a trace store with probes.
UNTRACED_URLS = "healthz,readyz,metrics,static,docs-assets"


def otlp_requested(environ: os._Environ | dict = os.environ) -> bool:
    """Whether the standard OTEL_* variables ask for traces over OTLP."""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none" or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return exporter == "otlp" or bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                                      or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def enabled(settings: Settings) -> bool:
    return otlp_requested() or settings.trace_file is not None


def setup(settings: Settings, *, service: str) -> bool:
    """Install this process's tracer provider and the library instrumentations, once; False when tracing is off."""
    if not enabled(settings):
        return False
    if isinstance(trace.get_tracer_provider(), _sdk().TracerProvider):
        return True
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    sdk = _sdk()
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, where set, win over the role's name.
    provider = sdk.TracerProvider(resource=Resource.create({"service.name": service}))
    if otlp_requested():
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if settings.trace_file is not None:
        provider.add_span_processor(BatchSpanProcessor(file_exporter(settings.trace_file)))
    trace.set_tracer_provider(provider)
    for instrumentor in (CeleryInstrumentor(), SQLAlchemyInstrumentor(), HTTPXClientInstrumentor(),
                         BotocoreInstrumentor(), RedisInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            # The SQLAlchemy instrumentation declares < 2.1 and would refuse our 2.1; its engine events are the
            # same in 2.1, and tests/observability/test_traces.py sees the SQL spans.
            instrumentor.instrument(tracer_provider=provider, skip_dep_check=True)
    return True


def instrument_app(app, settings: Settings) -> None:
    """Server spans for the FastAPI app (a no-op when tracing is off)."""
    if setup(settings, service="ocrq-api"):
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls=UNTRACED_URLS)


def file_exporter(path: Path):
    """The SDK's console exporter writing one JSON span a line to `path` (several processes append to it)."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    path.parent.mkdir(parents=True, exist_ok=True)
    return ConsoleSpanExporter(out=_AppendEachBatch(path), formatter=lambda span: span.to_json(indent=None) + "\n")


class _AppendEachBatch:
    """Opens the file for each batch instead of holding it: Celery's embedded beat closes every inherited file
    descriptor after its fork, and a held one's number, reused by SQLite, had spans written into the database."""

    def __init__(self, path: Path) -> None:
        self.path, self.lines = path, []

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        lines, self.lines = self.lines, []
        if lines:
            with self.path.open("a", encoding="utf-8") as out:
                out.write("".join(lines))


def flush() -> None:
    """Export what is buffered; for a process about to end without running atexit (a prefork child)."""
    provider = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush()


@contextmanager
def span(name: str, **attributes) -> Iterator[trace.Span]:
    """A span of ocrq's own, child of the current one, with ocrq.* attributes (None values left out)."""
    with trace.get_tracer(TRACER).start_as_current_span(name, attributes=_attributes(attributes)) as current:
        yield current


def annotate(**attributes) -> None:
    """Add ocrq.* attributes to the current span (the request's, the task's); nothing when none is recording."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(_attributes(attributes))


def _attributes(attributes: dict) -> dict:
    return {PREFIX + name: value for name, value in attributes.items() if value is not None}


def _sdk():
    from opentelemetry.sdk import trace as sdk_trace

    return sdk_trace
