"""A loopback proxy in front of SeaweedFS that answers object reads with S3's 500 InternalError while armed, as a
store answers while it restarts; everything else is forwarded unchanged (the Host header too, so SigV4 holds).
Armed, it answers the requests of the given methods whose path holds the given part (job sources by default)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.http import loopback

BUSY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error. Please try again.</Message></Error>")


class BusyS3Proxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.busy_until = 0.0
        self.busy_answers = 0
        self.busy_methods: tuple[str, ...] = ("GET",)
        self.busy_path_part = "/jobs/"
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                if (self.command in proxy.busy_methods and proxy.busy_path_part in self.path
                        and time.monotonic() < proxy.busy_until):
                    proxy.busy_answers += 1
                    self.send_response(500)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(BUSY)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(BUSY)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
                answer = loopback().request(self.command, proxy.upstream + self.path, headers=headers,
                                            content=body, timeout=60)
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in ("connection", "transfer-encoding", "content-length", "content-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer.content)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def busy_for(self, seconds: float, *, methods: tuple[str, ...] = ("GET",), path_part: str = "/jobs/") -> None:
        self.busy_methods, self.busy_path_part = methods, path_part
        self.busy_until = time.monotonic() + seconds

    def calm(self) -> None:
        self.busy_until = 0.0

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
