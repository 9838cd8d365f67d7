"""A webhook receiver on 127.0.0.1 (or a given address) that behaves like a careful real one: it verifies every message with
standardwebhooks and processes each webhook-id once, keeping a dedupe table."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic()
    verified: bool


@dataclass(frozen=True)
class Step:
    """How the receiver answers one request: a status with headers, or processing after a sleep."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    sleep_s: float = 0.0


OK = Step()


def fail(status: int, **headers: str) -> Step:
    return Step(status=status, headers=tuple((k.replace("_", "-"), v) for k, v in headers.items()))


def slow(seconds: float) -> Step:
    return Step(sleep_s=seconds)


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.url = f"http://{host}:{self.server_address[1]}"
        self.secrets: list[str] = []
        self.plans: dict[str, list[Step]] = {}
        self.received: list[Received] = []
        self.dedupe: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.arrivals = threading.Condition(self.lock)

    def plan(self, path: str, *steps: Step) -> str:
        """Answer the first requests to `path` with these steps, then with 200; returns the full URL."""
        self.plans[path] = list(steps)
        return self.url + path

    def to(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 20) -> list[Received]:
        with self.arrivals:
            self.arrivals.wait_for(lambda: len([r for r in self.received if r.path == path]) >= count, timeout)
        return self.to(path)

    def handle_error(self, request, client_address) -> None:
        pass  # a sender that went away mid-answer (the killed-worker test) is expected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Receiver

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(404, b"no such document")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified = self._verify(body, headers)
        with self.server.arrivals:
            self.server.received.append(Received(self.path, headers, body, time.monotonic(), verified))
            steps = self.server.plans.get(self.path, [])
            step = steps.pop(0) if steps else OK
            self.server.arrivals.notify_all()
        if not verified:
            self._answer(400, b"signature does not verify")
            return
        if step.status >= 300:
            self._answer(step.status, b"planned failure", dict(step.headers))
            return
        time.sleep(step.sleep_s)
        with self.server.lock:
            self.server.dedupe.setdefault(headers["webhook-id"], body)
        self._answer(204)

    def _verify(self, body: bytes, headers: dict[str, str]) -> bool:
        for secret in self.server.secrets:
            try:
                Webhook(secret).verify(body, headers)
                return True
            except WebhookVerificationError:
                continue
        return False

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def start(host: str = "127.0.0.1") -> Receiver:
    receiver = Receiver(host)
    threading.Thread(target=receiver.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return receiver
