"""An OpenAI-compatible OCR server on rapidocr: the dev/CI stand-in for a vLLM engine, with fault injection.

    python -m worker.engines.server_cpu --port 8100 [--served-model-name NAME] [--lane LANE] [--admin]

/v1/models and /v1/chat/completions answer as vLLM does; the page is the data-URL image of the
user message. GET /ocrq/weights answers as the ocrq vLLM plugin does, for an engine that owns its
weights (it shares nothing). With --admin (or admin=True), POST /admin/faults {"mode": "503"|"429"|
"oom"|"dead"|"length"|"delay", "count": N, "delay_s": S} makes the next N chat requests fail that way
(-1: until cleared), and GET /admin/requests lists the chat requests seen (their parameters without the messages, and the answer's
content and logprobs, the image's size), to check batch-1 degradation, what the client sent and what it was told.
OCRQ_CPU_ENGINE_FAULTS="503:2" sets a fault at start.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import io
import math
import os
import re
import threading
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
from anyio import CapacityLimiter, to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, Field

from common.queue.names import LANES
from common.settings import get_settings
from ocrq_vllm_plugin.status import ROUTE, default_state
from worker.engines.inference import DETECTION

FAULT_MODES = ("503", "429", "oom", "dead", "length", "delay")
MAX_DATA_URL_BYTES = 64 * 1024 * 1024
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class FaultSpec(BaseModel):
    mode: str = Field(pattern="^(" + "|".join(FAULT_MODES) + ")$")
    count: int = Field(default=1, ge=-1)
    delay_s: float = Field(default=0.0, ge=0.0)


@dataclass
class Faults:
    """The fault the next chat requests get; count -1 means until cleared."""

    mode: str | None = None
    count: int = 0
    delay_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, spec: FaultSpec) -> None:
        with self._lock:
            self.mode, self.count, self.delay_s = spec.mode, spec.count, spec.delay_s

    def clear(self) -> None:
        with self._lock:
            self.mode, self.count, self.delay_s = None, 0, 0.0

    def take(self) -> tuple[str | None, float]:
        with self._lock:
            if self.mode is None or self.count == 0:
                return None, 0.0
            if self.count > 0:
                self.count -= 1
            return self.mode, self.delay_s


@dataclass
class RequestLog:
    """Start and end of every chat request, and how many overlapped at most."""

    entries: list[dict] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def start(self) -> dict:
        entry = {"start": time.monotonic(), "end": None, "status": None, "temperature": None, "params": {}}
        self.entries.append(entry)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return entry

    def finish(self, entry: dict, status: int) -> None:
        entry["end"], entry["status"] = time.monotonic(), status
        self.in_flight -= 1

    def reset(self) -> None:
        self.entries.clear()
        self.max_in_flight = self.in_flight


def parse_fault_env(value: str) -> FaultSpec | None:
    """'503:2' -> FaultSpec(mode='503', count=2); '' -> None."""
    if not value.strip():
        return None
    mode, _, count = value.partition(":")
    return FaultSpec(mode=mode.strip(), count=int(count or 1))


def decode_data_url(url: str) -> Image.Image:
    """The RGB image of a base64 data URL; ValueError for anything else (no network fetches here)."""
    if not url.startswith("data:") or ";base64," not in url[:100]:
        raise ValueError("only base64 data: URLs are accepted")
    payload = url.split(",", 1)[1]
    if len(payload) > MAX_DATA_URL_BYTES:
        raise ValueError("image too large")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(payload, validate=True)))
        image.load()
    except (binascii.Error, UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"undecodable image: {exc}") from exc
    return image.convert("RGB")


def find_image_url(messages: list[dict]) -> str | None:
    """The first image_url of the chat messages."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    image_url = part.get("image_url")
                    return image_url.get("url") if isinstance(image_url, dict) else image_url
    return None


def cap_tokens(text: str, max_tokens: int) -> tuple[str, int, str]:
    """Text cut to max_tokens word-ish tokens, the token count, and the finish_reason."""
    tokens = list(_TOKEN.finditer(text))
    if len(tokens) <= max_tokens:
        return text, len(tokens), "stop"
    return text[: tokens[max_tokens - 1].end()], max_tokens, "length"


def run_ocr(engine, image: Image.Image) -> tuple[str, list[float]]:
    """rapidocr's lines for one page, top to bottom, one per line; and each line's score."""
    result = engine(np.asarray(image.convert("RGB")))
    return "\n".join(result.txts or ()), [float(v) for v in result.scores or ()]


def token_logprobs(text: str, scores: list[float]) -> list[dict]:
    """vLLM's chat `logprobs.content` for the text: one entry per token (a token takes the whitespace before
    it, so the tokens spell the text), its log-probability that of its line's score, spread a little from
    token to token (1 to 0.92 times) so that tokens can be told apart downstream."""
    entries = []
    line, at = 0, 0
    for n, match in enumerate(_TOKEN.finditer(text)):
        piece = text[at:match.end()]
        line += piece.count("\n")
        score = scores[line] if line < len(scores) else 1.0
        value = math.log(max(score * (1 - 0.02 * (n % 5)), 1e-6))
        entries.append({"token": piece, "logprob": value, "bytes": list(piece.encode()), "top_logprobs": []})
        at = match.end()
    if at < len(text) and entries:
        entries[-1]["token"] += text[at:]
        entries[-1]["bytes"] = list(entries[-1]["token"].encode())
    return entries


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"object": "error", "message": message, "type": kind, "code": status}
    )


def _completion(*, model: str, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int,
                logprobs: list[dict] | None = None) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason,
             "logprobs": None if logprobs is None else {"content": logprobs}}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def create_app(
    *,
    served_model_name: str = "rapidocr",
    admin: bool = False,
    concurrency: int = 1,
    ocr_threads: int = 0,
    faults: FaultSpec | None = None,
    lane: str | None = None,
) -> FastAPI:
    """The server app; rapidocr loads once, in the lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from rapidocr import RapidOCR

        params: dict = {"Global.log_level": "error"} | DETECTION
        if ocr_threads > 0:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = ocr_threads
        app.state.ocr = RapidOCR(params=params)
        yield

    app = FastAPI(title="ocrq CPU engine (OpenAI-compatible)", lifespan=lifespan)
    app.state.faults = Faults()
    app.state.requests = RequestLog()
    limiter = CapacityLimiter(concurrency)
    if faults:
        app.state.faults.arm(faults)

    @app.get("/health")
    async def health() -> dict:
        return {"ok": True, "pid": os.getpid()}

    @app.get(ROUTE)
    async def weights() -> dict:
        return default_state() | {"lane": lane, "engine_pid": os.getpid(), "weight_bytes_allocated": 0}

    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": served_model_name, "object": "model", "owned_by": "ocrq", "created": 0}],
        }

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        entry = app.state.requests.start()
        try:
            body = await request.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            entry["temperature"] = body.get("temperature")
            entry["params"] = {key: value for key, value in body.items() if key != "messages"}
            response = await _chat(body, entry, request)
        else:
            response = _error(400, "body is not a JSON object", "BadRequestError")
        app.state.requests.finish(entry, response.status_code)
        return response

    async def _client_left_during(request: Request, seconds: float) -> bool:
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            if await request.is_disconnected():
                return True
            await asyncio.sleep(0.1)
        return False

    async def _chat(body: dict, entry: dict, request: Request) -> JSONResponse:
        if body.get("model") != served_model_name:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 4096)
        mode, delay_s = app.state.faults.take()
        if mode == "503":
            return _error(503, "Service Unavailable: engine at capacity (injected)", "ServiceUnavailableError")
        if mode == "429":
            return _error(429, "Too Many Requests (injected)", "RateLimitError")
        if mode == "oom":
            return _error(
                500,
                "CUDA out of memory. Tried to allocate 2.31 GiB. GPU 0 has a total capacity of 15.70 GiB "
                "(injected torch.OutOfMemoryError)",
                "InternalServerError",
            )
        if mode == "dead":
            # What vLLM's API server answers for requests in flight when its engine core dies.
            return _error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                          "InternalServerError")
        if mode == "delay" and await _client_left_during(request, delay_s):
            # vLLM aborts a request whose client has gone; so does this one, keeping no slot busy.
            return _error(499, "client disconnected", "ClientDisconnected")
        url = find_image_url(body.get("messages") or [])
        if url is None:
            return _error(400, "no image_url in the messages", "BadRequestError")
        try:
            image = decode_data_url(url)
        except ValueError as exc:
            return _error(400, str(exc), "BadRequestError")
        entry["image_size"] = [image.width, image.height]
        prompt_tokens = math.ceil(image.width / 28) * math.ceil(image.height / 28)
        if mode == "length":
            runaway = " ".join(["|"] * max_tokens)
            return JSONResponse(
                _completion(
                    model=served_model_name, text=runaway, finish_reason="length",
                    prompt_tokens=prompt_tokens, completion_tokens=max_tokens,
                )
            )
        text, scores = await to_thread.run_sync(run_ocr, app.state.ocr, image, limiter=limiter)
        text, count, finish_reason = cap_tokens(text, max_tokens)
        logprobs = token_logprobs(text, scores) if body.get("logprobs") else None
        entry["answer"] = {"content": text, "logprobs": logprobs}
        return JSONResponse(
            _completion(
                model=served_model_name, text=text, finish_reason=finish_reason,
                prompt_tokens=prompt_tokens, completion_tokens=count, logprobs=logprobs,
            )
        )

    if admin:

        @app.post("/admin/faults")
        async def set_faults(spec: FaultSpec) -> dict:
            app.state.faults.arm(spec)
            return {"mode": spec.mode, "count": spec.count, "delay_s": spec.delay_s}

        @app.delete("/admin/faults")
        async def clear_faults() -> dict:
            app.state.faults.clear()
            return {"mode": None}

        @app.get("/admin/requests")
        async def requests_seen() -> dict:
            log = app.state.requests
            return {"requests": list(log.entries), "max_in_flight": log.max_in_flight}

        @app.delete("/admin/requests")
        async def reset_requests() -> dict:
            app.state.requests.reset()
            return {"requests": []}

    return app


def main(argv: list[str] | None = None) -> None:
    """Run the server with uvicorn."""
    import uvicorn

    parser = argparse.ArgumentParser(description="ocrq CPU engine: OpenAI-compatible rapidocr server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--served-model-name", default="rapidocr")
    parser.add_argument("--concurrency", type=int, default=1, help="pages OCRed at once")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads per page (0: its default)")
    parser.add_argument("--lane", choices=LANES, default=None,
                        help="the priority lane this engine serves, reported by /ocrq/weights")
    parser.add_argument("--admin", action="store_true", help="enable /admin/faults and /admin/requests")
    args = parser.parse_args(argv)
    app = create_app(
        served_model_name=args.served_model_name,
        admin=args.admin,
        concurrency=args.concurrency,
        ocr_threads=args.threads,
        faults=parse_fault_env(get_settings().cpu_engine_faults),
        lane=args.lane,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
