"""An OTLP/HTTP trace receiver on loopback, in the test's process: what every traced process exports lands here."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int
    service: str
    attributes: dict
    start_ns: int
    end_ns: int


def _value(value: AnyValue):
    kind = value.WhichOneof("value")
    return [_value(v) for v in value.array_value.values] if kind == "array_value" else getattr(value, kind)


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, name="otlp-collector", daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    received.append(Span(
                        trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex() or None,
                        name=s.name, kind=s.kind, service=resource.get("service.name", ""),
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano))
        with self.lock:
            self.spans += received

    def wait_for(self, predicate, *, timeout: float = 60) -> list[Span]:
        """All spans received once one of them satisfies `predicate`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                spans = list(self.spans)
            if any(predicate(span) for span in spans):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"no such span in {timeout} s; got {sorted({s.name for s in spans})}")

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(404)
            return
        self.server.receive(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_args) -> None:
        pass
