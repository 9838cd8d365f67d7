"""The outbound guard against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import certifi
import pytest

from common.netguard import (
    FetchFailed,
    FetchTimeout,
    FetchTooLarge,
    UrlRefused,
    check_url,
    fetch,
)
from common.webhooks.sender import send_once

LOOPBACK = ["127.0.0.1/32"]
CHUNK = 64 * 1024
STREAM_LIMIT = 256 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        route = getattr(self, "route_" + self.path.strip("/").replace("-", "_"), None)
        if route is None:
            self._answer(404, b"not found")
        else:
            route()

    def _answer(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, total: int) -> None:
        """Write up to total bytes, counting what the socket accepted before the client went away."""
        sent = 0
        try:
            while sent < total:
                piece = b"x" * min(CHUNK, total - sent)
                if self.server.chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                else:
                    self.wfile.write(piece)
                sent += len(piece)
        except OSError:
            pass
        finally:
            self.server.sent[self.path] = sent
            self.server.done.set()

    def route_ok(self) -> None:
        self._answer(200, b"hello", Content_Type="text/plain")

    def route_host(self) -> None:
        self._answer(200, f"host={self.headers['Host']}".encode())

    def route_to_ok(self) -> None:
        self._answer(302, b"", Location="/ok")

    def route_to_metadata(self) -> None:
        self._answer(302, b"", Location="http://169.254.169.254/latest/meta-data/")

    def route_loop(self) -> None:
        self._answer(302, b"", Location="/loop")

    def route_exact(self) -> None:
        self._answer(200, b"y" * 1000)

    def route_big_declared(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(STREAM_LIMIT))
        self.end_headers()
        self.server.chunked = False
        self._stream(STREAM_LIMIT)

    def route_big_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.server.chunked = True
        self._stream(STREAM_LIMIT)

    def route_slow(self) -> None:
        time.sleep(3)
        self._answer(200, b"late")

    def route_drip(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b"z")
                time.sleep(0.05)
        except OSError:
            pass


def _start(server: ThreadingHTTPServer) -> ThreadingHTTPServer:
    server.daemon_threads = True
    server.paths, server.sent, server.done, server.chunked = [], {}, threading.Event(), False
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def server():
    httpd = _start(ThreadingHTTPServer(("127.0.0.1", 0), _Handler))
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def fake_dns(monkeypatch):
    """Answer names in `answers` once each, from the queue; a second lookup of the same name fails."""
    real = socket.getaddrinfo
    answers: dict[str, list[list[str]]] = {}
    lookups: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        if not answers[host]:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in answers[host].pop(0)
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers, lookups


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local (cloud metadata)"),
        ("http://10.0.0.1/", "private address 10.0.0.1"),
        ("http://192.168.1.1/", "private address"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[::1]/", "loopback address ::1"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[::ffff:10.1.2.3]/", "private"),
        ("http://100.64.0.1/", "non-public"),
        ("http://[fec0::1]/", "site-local address fec0::1"),
        ("http://192.0.0.8/", "non-public address 192.0.0.8"),
        ("http://[64:ff9b:1::1]/", "address 64:ff9b:1::1"),
        ("http://[2001:db8::1]/", "private address 2001:db8::1"),
        ("http://198.18.0.1/", "private address 198.18.0.1"),
        ("http://240.0.0.1/", "private address 240.0.0.1"),
        ("http://[ff02::1]/", "multicast"),
        ("file:///etc/passwd", "scheme not allowed"),
        ("gopher://127.0.0.1:70/", "scheme not allowed"),
        ("ftp://example.com/", "scheme not allowed"),
        ("http://user:secret@example.com/", "credentials in URL"),
        ("http:///nohost", "no host"),
        ("not a url", "scheme not allowed"),
    ],
)
def test_check_url_refuses_before_connecting(url, reason):
    with pytest.raises(UrlRefused, match=re.escape(reason)):
        check_url(url, allowlist=LOOPBACK)


def test_check_url_accepts_allowlisted_and_public_addresses():
    check_url("http://127.0.0.1:9/", allowlist=LOOPBACK)
    check_url("http://[::ffff:127.0.0.1]/", allowlist=LOOPBACK)
    check_url("http://10.0.0.1/", allowlist=["10.0.0.0/8"])
    check_url("https://8.8.8.8/", allowlist=[])
    with pytest.raises(UrlRefused, match="loopback"):
        check_url("http://127.0.0.2/", allowlist=LOOPBACK)
    with pytest.raises(UrlRefused, match="localhost resolves to loopback address"):
        check_url("http://localhost/", allowlist=[])


def test_every_resolved_address_must_pass(fake_dns):
    answers, _ = fake_dns
    answers["mixed.test"] = [["127.0.0.1", "10.0.0.1"]]
    with pytest.raises(UrlRefused, match="private address 10.0.0.1"):
        check_url("http://mixed.test/", allowlist=LOOPBACK)


def test_unresolvable_host_is_refused(fake_dns):
    answers, _ = fake_dns
    answers["nowhere.test"] = []
    with pytest.raises(UrlRefused, match="unresolvable host nowhere.test"):
        check_url("http://nowhere.test/", allowlist=LOOPBACK)


def test_loopback_refused_without_allowlist_and_nothing_is_sent(server):
    with pytest.raises(UrlRefused, match="loopback address 127.0.0.1"):
        fetch(f"{server.url}/ok", allowlist=[], max_bytes=1000, timeout_s=5, max_redirects=0)
    assert server.paths == []


def test_loopback_fetched_with_allowlist(server):
    got = fetch(f"{server.url}/ok", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
    assert (got.content, got.content_type, got.final_url) == (b"hello", "text/plain", f"{server.url}/ok")


def test_redirect_is_followed_and_rechecked(server):
    got = fetch(f"{server.url}/to-ok", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=1)
    assert got.content == b"hello"
    assert got.final_url == f"{server.url}/ok"


def test_redirect_to_metadata_refused_on_the_hop(server):
    with pytest.raises(UrlRefused, match="link-local"):
        fetch(f"{server.url}/to-metadata", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=5)
    assert server.paths == ["/to-metadata"]


def test_redirect_limit(server):
    with pytest.raises(UrlRefused, match="too many redirects"):
        fetch(f"{server.url}/loop", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=3)
    assert len(server.paths) == 4


def test_redirect_refused_when_redirects_are_off(server):
    with pytest.raises(UrlRefused, match="too many redirects"):
        fetch(f"{server.url}/to-ok", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)


def test_non_2xx_fails_with_status(server):
    with pytest.raises(FetchFailed) as caught:
        fetch(f"{server.url}/missing", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
    assert caught.value.status == 404


def test_body_of_exactly_the_cap_passes_and_one_byte_over_fails(server):
    got = fetch(f"{server.url}/exact", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
    assert len(got.content) == 1000
    with pytest.raises(FetchTooLarge, match="Content-Length 1000"):
        fetch(f"{server.url}/exact", allowlist=LOOPBACK, max_bytes=999, timeout_s=5, max_redirects=0)


@pytest.mark.parametrize("path", ["/big-declared", "/big-chunked"])
def test_size_cap_stops_reading(server, path):
    started = time.monotonic()
    with pytest.raises(FetchTooLarge):
        fetch(f"{server.url}{path}", allowlist=LOOPBACK, max_bytes=100_000, timeout_s=30, max_redirects=0)
    assert server.done.wait(10), "the server never saw the client leave"
    # Socket buffers take some bytes the client never reads; reading the whole body would be STREAM_LIMIT.
    assert server.sent[path] < 8 * 1024 * 1024
    assert time.monotonic() - started < 10


def test_timeout_waiting_for_headers(server):
    started = time.monotonic()
    with pytest.raises(FetchTimeout):
        fetch(f"{server.url}/slow", allowlist=LOOPBACK, max_bytes=1000, timeout_s=0.5, max_redirects=0)
    assert time.monotonic() - started < 1.5


def test_total_time_cap_stops_a_slow_drip(server):
    # Each byte comes well within any per-read timeout; only the total cap can stop this.
    started = time.monotonic()
    with pytest.raises(FetchTimeout):
        fetch(f"{server.url}/drip", allowlist=LOOPBACK, max_bytes=1000, timeout_s=0.5, max_redirects=0)
    assert time.monotonic() - started < 1.5


@pytest.fixture()
def trickler():
    """A raw server on loopback that sends a whole answer's status line and headers one byte every 0.1 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Padding: " + b"p" * 200 + b"\r\n\r\nok":
                    if stop.is_set():
                        return
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(0.1)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


def test_total_time_cap_stops_headers_sent_a_byte_at_a_time(trickler):
    started = time.monotonic()
    with pytest.raises(FetchTimeout):
        fetch(f"{trickler}/", allowlist=LOOPBACK, max_bytes=1000, timeout_s=1, max_redirects=0)
    assert time.monotonic() - started < 2


def test_a_webhook_receiver_trickling_its_answer_is_cut_at_the_timeout(trickler):
    started = time.monotonic()
    attempt = send_once(url=f"{trickler}/hook", body=b"{}", headers={}, allowlist=LOOPBACK, timeout_s=1,
                        max_response_bytes=1000)
    assert time.monotonic() - started < 2
    assert (attempt.outcome, attempt.status_code) == ("retry", None), attempt
    assert attempt.error == "timed out after 1s"


def test_connection_is_pinned_to_the_checked_address(server, fake_dns):
    answers, lookups = fake_dns
    answers["rebind.test"] = [["127.0.0.1"]]
    port = server.server_address[1]
    got = fetch(f"http://rebind.test:{port}/host", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
    assert got.content == f"host=rebind.test:{port}".encode()
    assert lookups == ["rebind.test"]


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """An HTTPS server on 127.0.0.1 whose self-signed certificate names rebind.test, trusted for this test only."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=rebind.test",
         "-addext", "subjectAltName=DNS:rebind.test"],
        check=True, capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    _start(httpd)
    monkeypatch.setattr(certifi, "where", lambda: str(cert))
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_pinned_https_verifies_the_certificate_against_the_name(tls_server, fake_dns):
    answers, _ = fake_dns
    answers["rebind.test"] = [["127.0.0.1"]]
    answers["other.test"] = [["127.0.0.1"]]
    port = tls_server.server_address[1]
    got = fetch(f"https://rebind.test:{port}/host", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
    assert got.content == f"host=rebind.test:{port}".encode()
    with pytest.raises(FetchFailed, match="connection failed"):
        fetch(f"https://other.test:{port}/host", allowlist=LOOPBACK, max_bytes=1000, timeout_s=5, max_redirects=0)
