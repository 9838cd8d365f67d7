"""An ASGI middleware that stops reading a request body past a byte limit."""

from __future__ import annotations

from api.errors import problem


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """Answers 413 as soon as Content-Length or the streamed body passes `max_bytes`."""

    def __init__(self, app, *, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length and length.isdigit() and int(length) > self.max_bytes:
            return await self._reject(scope, receive, send)
        seen = 0
        started = False

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._reject(scope, receive, send)

    async def _reject(self, scope, receive, send) -> None:
        response = problem(413, f"request body is larger than {self.max_bytes} bytes", code="too_large")
        await response(scope, receive, send)
