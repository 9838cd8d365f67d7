"""One delivery attempt against a real receiver on 127.0.0.1, and the retry schedule."""

from __future__ import annotations

import random
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from common.settings import Settings
from common.webhooks.sender import next_delay, parse_retry_after, send_once
from common.webhooks.signing import new_secret, sign

LOOPBACK = ["127.0.0.1/32"]
SECRET = new_secret()
BODY = b'{"type":"job.succeeded","data":{"id":"job_1"}}'
CHUNK = 64 * 1024
STREAM_LIMIT = 256 * 1024 * 1024


class _Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((self.path, dict(self.headers), body))
        route = getattr(self, "route_" + self.path.strip("/").replace("-", "_"))
        route(body)

    def _answer(self, status: int, body: bytes = b"", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def route_hook(self, body: bytes) -> None:
        try:
            Webhook(SECRET).verify(body, dict(self.headers))
        except WebhookVerificationError as exc:
            self._answer(400, str(exc).encode())
            return
        self._answer(204)

    def route_gone(self, body: bytes) -> None:
        self._answer(410, b"endpoint removed")

    def route_busy(self, body: bytes) -> None:
        self._answer(503, b"try later", Retry_After="7")

    def route_limited(self, body: bytes) -> None:
        when = datetime.now(timezone.utc) + timedelta(seconds=120)
        self._answer(429, b"slow down", Retry_After=format_datetime(when, usegmt=True))

    def route_slow(self, body: bytes) -> None:
        time.sleep(3)
        self._answer(200)

    def route_moved(self, body: bytes) -> None:
        self._answer(302, Location="http://169.254.169.254/latest/meta-data/")

    def route_bad(self, body: bytes) -> None:
        self._answer(400, b"unknown event type")

    def route_huge_error(self, body: bytes) -> None:
        self._stream(500)

    def route_huge_ok(self, body: bytes) -> None:
        self._stream(200)

    def _stream(self, status: int) -> None:
        """An endless chunked body; count what the socket accepted before the sender went away."""
        self.send_response(status)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while sent < STREAM_LIMIT:
                self.wfile.write(b"%x\r\n%s\r\n" % (CHUNK, b"e" * CHUNK))
                sent += CHUNK
        except OSError:
            pass
        finally:
            self.server.sent = sent
            self.server.done.set()


@pytest.fixture
def receiver():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    httpd.daemon_threads = True
    httpd.received, httpd.sent, httpd.done = [], None, threading.Event()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _send(url: str, *, allowlist=LOOPBACK, timeout_s: float = 5, max_response_bytes: int = 1024, body: bytes = BODY):
    headers = sign(secrets=[SECRET], msg_id="msg_1", timestamp=datetime.now(timezone.utc), body=body)
    return send_once(
        url=url,
        body=body,
        headers=headers,
        allowlist=allowlist,
        timeout_s=timeout_s,
        max_response_bytes=max_response_bytes,
    )


def test_2xx_is_delivered_and_verifies(receiver):
    attempt = _send(f"{receiver.url}/hook")
    assert (attempt.outcome, attempt.status_code, attempt.error) == ("delivered", 204, None)
    assert attempt.latency_ms >= 0
    (_, headers, body), = receiver.received
    assert body == BODY and headers["webhook-id"] == "msg_1"
    assert headers["Content-Type"] == "application/json"


def test_bad_signature_is_a_failed_4xx(receiver):
    headers = sign(secrets=[new_secret()], msg_id="msg_1", timestamp=datetime.now(timezone.utc), body=BODY)
    attempt = send_once(
        url=f"{receiver.url}/hook", body=BODY, headers=headers, allowlist=LOOPBACK, timeout_s=5, max_response_bytes=1024
    )
    assert (attempt.outcome, attempt.status_code) == ("failed", 400)
    assert "No matching signature" in attempt.error


def test_410_disables(receiver):
    attempt = _send(f"{receiver.url}/gone")
    assert (attempt.outcome, attempt.status_code, attempt.error) == ("disable", 410, "HTTP 410: endpoint removed")


def test_503_with_retry_after_seconds(receiver):
    attempt = _send(f"{receiver.url}/busy")
    assert (attempt.outcome, attempt.status_code, attempt.retry_after_s) == ("retry", 503, 7)
    assert attempt.error == "HTTP 503: try later"


def test_429_with_retry_after_date(receiver):
    attempt = _send(f"{receiver.url}/limited")
    assert (attempt.outcome, attempt.status_code) == ("retry", 429)
    assert 110 <= attempt.retry_after_s <= 120


def test_slow_receiver_times_out_and_is_retried(receiver):
    started = time.monotonic()
    attempt = _send(f"{receiver.url}/slow", timeout_s=0.5)
    assert (attempt.outcome, attempt.status_code) == ("retry", None)
    assert "timed out" in attempt.error
    assert 400 <= attempt.latency_ms < 1500
    assert time.monotonic() - started < 1.5


def test_closed_port_is_retried():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    attempt = _send(f"http://127.0.0.1:{port}/hook")
    assert (attempt.outcome, attempt.status_code) == ("retry", None)
    assert "connection error" in attempt.error


def test_redirect_is_not_followed(receiver):
    attempt = _send(f"{receiver.url}/moved")
    assert (attempt.outcome, attempt.status_code) == ("failed", 302)
    assert "not followed" in attempt.error
    assert [path for path, _, _ in receiver.received] == ["/moved"]


def test_other_4xx_fails(receiver):
    attempt = _send(f"{receiver.url}/bad")
    assert (attempt.outcome, attempt.status_code, attempt.retry_after_s) == ("failed", 400, None)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://10.0.0.1/hook", "private"),
        ("ftp://127.0.0.1/hook", "scheme not allowed"),
    ],
)
def test_refused_urls_fail_without_traffic(url, reason):
    attempt = _send(url)
    assert (attempt.outcome, attempt.status_code) == ("failed", None)
    assert attempt.error.startswith("refused:") and reason in attempt.error


def test_loopback_refused_without_allowlist(receiver):
    attempt = _send(f"{receiver.url}/hook", allowlist=[])
    assert attempt.outcome == "failed" and "loopback" in attempt.error
    assert receiver.received == []


@pytest.mark.parametrize(("path", "outcome"), [("/huge-error", "retry"), ("/huge-ok", "delivered")])
def test_response_body_read_is_capped(receiver, path, outcome):
    started = time.monotonic()
    attempt = _send(f"{receiver.url}{path}", max_response_bytes=1000)
    assert attempt.outcome == outcome
    assert receiver.done.wait(10), "the receiver never saw the sender leave"
    # Socket buffers take some bytes the sender never reads; reading it all would be STREAM_LIMIT.
    assert receiver.sent < 8 * 1024 * 1024
    assert time.monotonic() - started < 10
    if outcome == "retry":
        assert attempt.error == "HTTP 500: " + "e" * 200


def test_next_delay_follows_the_schedule_with_jitter():
    schedule = [0, 5, 300]
    rng = random.Random(7)
    assert next_delay(attempt_no=0, schedule_s=schedule, retry_after_s=None, rng=rng) == 0
    delays = [next_delay(attempt_no=1, schedule_s=schedule, retry_after_s=None, rng=rng) for _ in range(50)]
    assert all(4.5 <= d <= 5.5 for d in delays) and len(set(delays)) > 1
    assert 270 <= next_delay(attempt_no=2, schedule_s=schedule, retry_after_s=None, rng=rng) <= 330
    assert next_delay(attempt_no=3, schedule_s=schedule, retry_after_s=None, rng=rng) is None


def test_next_delay_honours_retry_after_within_a_bound():
    schedule = [0, 5, 300]
    rng = random.Random(7)
    assert next_delay(attempt_no=1, schedule_s=schedule, retry_after_s=60, rng=rng) == 60
    assert 270 <= next_delay(attempt_no=2, schedule_s=schedule, retry_after_s=7, rng=rng) <= 330
    assert next_delay(attempt_no=1, schedule_s=schedule, retry_after_s=10**9, rng=rng, max_retry_after_s=600) == 600
    assert next_delay(attempt_no=3, schedule_s=schedule, retry_after_s=7, rng=rng) is None


def test_parse_retry_after():
    assert parse_retry_after("7") == 7
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-3") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0


def test_retry_schedule_setting_reads_a_comma_list():
    settings = Settings(_env_file=None, webhook_retry_schedule_s="0, 0.2,1")
    assert settings.webhook_retry_schedule_s == [0, 0.2, 1]
    assert Settings(_env_file=None).webhook_retry_schedule_s == [0, 5, 300, 1800, 7200, 18000, 36000, 36000]
