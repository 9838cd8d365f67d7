"""The vLLM engine: LightOnOCR pages over the OpenAI-compatible chat API of one or more `vllm serve` engines."""

from __future__ import annotations

import base64
import io
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Self

import httpx
from PIL import Image
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from common.engines.lanes import base_url
from common.settings import Settings
from worker.engines import gpu_blocks, markdown_blocks
from worker.engines.base import EngineError, EngineOverloaded, PageText
from worker.engines.line_boxes import LineDetector, PageOrientation

OOM_MARKERS = ("out of memory", "outofmemoryerror", "cuda oom", "cuda error: out of memory")
# vLLM's answers when its engine core has died: the engine is going down, the page is not at fault.
ENGINE_DEAD_MARKERS = ("enginecore encountered an issue", "enginedeaderror", "engine core is dead")
OVERLOAD_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class _Completion:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    url: str
    logprobs: list[dict] | None = None  # the OpenAI chat API's logprobs.content: one {token, logprob, bytes} per token


@dataclass(frozen=True)
class _Page:
    """A page as sent: the image turned upright (when orientation is on), and its data URL."""

    data_url: str
    image: Image.Image
    rotation: int | None


class _NotAlone(Exception):
    """The page could not be read on the shared batch; carries the error to retry it at batch 1."""

    def __init__(self, error: EngineOverloaded) -> None:
        super().__init__(str(error))
        self.error = error


def encode_page(image: Image.Image, *, image_format: str = "png") -> str:
    """The page as a data URL: lossless PNG (fast compression) or lossless WebP."""
    buffer = io.BytesIO()
    if image_format == "webp":
        image.save(buffer, format="WEBP", lossless=True, method=0)
        mime = "image/webp"
    else:
        image.save(buffer, format="PNG", compress_level=1)
        mime = "image/png"
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def classify_failure(*, status: int, body: str, url: str) -> EngineError:
    """The EngineError an unsuccessful HTTP answer stands for."""
    reason = f"HTTP {status} from {url}: {body.strip()[:300]}"
    if any(marker in body.lower() for marker in OOM_MARKERS):
        return EngineOverloaded(reason, kind="oom")
    if status >= 500 and any(marker in body.lower() for marker in ENGINE_DEAD_MARKERS):
        return EngineOverloaded(reason, kind="unavailable")
    if status in OVERLOAD_STATUSES:
        return EngineOverloaded(reason, kind="overloaded")
    if 400 <= status < 500:
        return EngineError(reason, kind="invalid")
    return EngineError(reason, kind="engine")


def _is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


class VllmEngine:
    """Reads pages through vLLM engines: concurrent batches, bounded in-flight, batch-1 degradation."""

    name = "vllm"

    def __init__(
        self,
        *,
        urls: list[str],
        model: str,
        timeout_s: float = 180.0,
        max_in_flight: int = 64,
        max_tokens: int = 4096,
        temperature: float = 0.2,
        top_p: float = 0.9,
        retries: int = 3,
        backoff_s: float = 0.5,
        retry_temperature: float = 0.6,
        repetition_retries: int = 1,
        image_format: str = "png",
        guard_repetition: bool = True,
        extra_body: dict | None = None,
        down_s: float = 10.0,
        logprobs: bool = True,
        layout: LineDetector | None = None,
        orientation: PageOrientation | None = None,
        grounding: bool = False,
    ) -> None:
        if not urls:
            raise ValueError("VllmEngine needs at least one engine URL (OCRQ_ENGINE_URLS)")
        if max_in_flight < 1 or retries < 0 or repetition_retries < 0:
            raise ValueError("max_in_flight must be >= 1; retries and repetition_retries >= 0")
        self.urls = [base_url(u) for u in urls]
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.retries = retries
        self.backoff_s = backoff_s
        self.retry_temperature = retry_temperature
        self.repetition_retries = repetition_retries
        self.image_format = image_format
        # Off only for benchmarks that force the output length (ignore_eos), where "length" is expected.
        self.guard_repetition = guard_repetition
        self.extra_body = dict(extra_body or {})
        # The sampled tokens' log-probabilities, for word, line and page confidence.
        self.logprobs = logprobs
        # Turns pages upright before sending and lays the answer onto detected lines; None: text only.
        self.layout = layout
        self.orientation = orientation
        # LightOnOCR-3's grounding mode: the model places its own blocks (the word "grounding" after the image).
        self.grounding = grounding
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            limits=httpx.Limits(max_connections=max_in_flight, max_keepalive_connections=max_in_flight),
        )
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="vllm-engine")
        self._turn = itertools.count()
        # An engine that refused a connection is passed over for a while, so one dead engine among several
        # costs its share of pages one failed connect, not a back-off on every turn that lands on it.
        self.down_s = down_s
        self._down_until: dict[str, float] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> VllmEngine:
        """An engine configured from OCRQ_ENGINE_* settings."""
        s = settings
        return cls(
            urls=s.engine_urls,
            model=s.engine_model,
            timeout_s=s.engine_timeout_s,
            max_in_flight=s.engine_max_in_flight,
            max_tokens=s.engine_max_tokens,
            temperature=s.engine_temperature,
            top_p=s.engine_top_p,
            retries=s.engine_retries,
            backoff_s=s.engine_backoff_s,
            retry_temperature=s.engine_retry_temperature,
            repetition_retries=s.engine_repetition_retries,
            image_format=s.engine_image_format,
            guard_repetition=s.engine_guard_repetition,
            extra_body=s.engine_extra_body,
            logprobs=s.engine_logprobs,
            layout=LineDetector(threads=s.cpu_threads) if s.engine_layout else None,
            orientation=PageOrientation() if s.engine_orientation else None,
            grounding=s.engine_grounding,
        )

    def read(self, images: list[Image.Image]) -> list[PageText | EngineError]:
        """OCR a batch concurrently; pages refused for capacity are retried one at a time with back-off."""
        pages = list(self._pool.map(self._prepare, images))
        outcomes = list(self._pool.map(self._read_shared, pages))
        return [
            self._read_alone(page, outcome.error) if isinstance(outcome, _NotAlone) else outcome
            for page, outcome in zip(pages, outcomes)
        ]

    def _prepare(self, image: Image.Image) -> _Page:
        rotation = None
        if self.orientation is not None:
            rotation, image = self.orientation.upright(image)
        return _Page(encode_page(image, image_format=self.image_format), image, rotation)

    def ping(self) -> bool:
        """True when at least one engine answers /v1/models and serves this model."""
        for url in self.urls:
            try:
                response = self._client.get(f"{url}/v1/models", timeout=5.0)
                if response.status_code == 200 and any(
                    m.get("id") == self.model for m in response.json().get("data", [])
                ):
                    return True
            except (httpx.HTTPError, ValueError):
                continue
        return False

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_shared(self, page: _Page) -> PageText | EngineError | _NotAlone:
        try:
            return self._read_page(page, started=time.perf_counter(), alone=False)
        except EngineOverloaded as exc:
            return exc if exc.kind == "unavailable" else _NotAlone(exc)
        except EngineError as exc:
            return exc

    def _read_alone(self, page: _Page, first: EngineOverloaded) -> PageText | EngineError:
        started = time.perf_counter()
        attempts = 0
        if self.retries == 0:
            return EngineOverloaded(f"{first}; no batch-1 retries configured", kind=first.kind)
        time.sleep(self.backoff_s)
        retrying = Retrying(
            stop=stop_after_attempt(self.retries),
            wait=wait_exponential_jitter(initial=self.backoff_s, max=self.backoff_s * 16),
            retry=retry_if_exception(lambda e: isinstance(e, EngineOverloaded) and e.kind != "unavailable"),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    return self._read_page(page, started=started, alone=True)
        except EngineOverloaded as exc:
            return EngineOverloaded(
                f"still refused after the batch and {attempts} attempt(s) alone: {exc}", kind=exc.kind
            )
        except EngineError as exc:
            return exc
        raise AssertionError("unreachable")

    def _read_page(self, page: _Page, *, started: float, alone: bool) -> PageText | EngineError:
        temperatures = [self.temperature] + [self.retry_temperature] * self.repetition_retries
        runaways = []
        for temperature in temperatures:
            done = self._complete(page.data_url, temperature=temperature)
            capped = done.finish_reason != "stop" or done.completion_tokens >= self.max_tokens
            if not self.guard_repetition or not capped:
                read = time.perf_counter()
                blocks, confidence = self._structure(page, done)
                return PageText(
                    text=markdown_blocks.grounded_markdown(done.text) if self.grounding else done.text,
                    engine=self.name,
                    model=self.model,
                    seconds=time.perf_counter() - started,
                    rotation=page.rotation,
                    blocks=blocks,
                    confidence=confidence,
                    details={
                        "layout_s": round(time.perf_counter() - read, 4),
                        "url": done.url,
                        "alone": alone,
                        "temperature": temperature,
                        "finish_reason": done.finish_reason,
                        "prompt_tokens": done.prompt_tokens,
                        "completion_tokens": done.completion_tokens,
                    },
                )
            runaways.append(
                f"finish_reason={done.finish_reason} after {done.completion_tokens} tokens "
                f"at temperature {temperature:g}"
            )
        return EngineError(
            f"runaway output (token cap {self.max_tokens}), page not truncated: " + "; ".join(runaways),
            kind="repetition",
        )

    def _structure(self, page: _Page, done: _Completion) -> tuple[list[dict] | None, float | None]:
        """The page's blocks and its confidence (with logprobs): on the detector's lines with a layout, else
        the markdown's structure with its lines spread down the page, marked `box_estimated`."""
        if self.layout is not None and done.text.strip():
            return self.layout.blocks(page.image, done.text, done.logprobs)
        tokens = gpu_blocks.token_spans(done.text, done.logprobs)
        blocks, confidence = gpu_blocks.build_blocks(done.text, [], tokens, size=page.image.size)
        if markdown_blocks.is_grounded(done.text):
            return blocks, confidence  # the model's own boxes
        return [block | {"box_estimated": True} for block in blocks], confidence

    def _complete(self, data_url: str, *, temperature: float) -> _Completion:
        content = [{"type": "image_url", "image_url": {"url": data_url}}]
        if self.grounding:
            content.append({"type": "text", "text": "grounding"})
        payload = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.max_tokens,
            "temperature": temperature,
            "top_p": self.top_p,
            **({"logprobs": True} if self.logprobs else {}),
            **self.extra_body,
        }
        retrying = Retrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential_jitter(initial=self.backoff_s, max=self.backoff_s * 16),
            retry=retry_if_exception(_is_connection_error),
            reraise=True,
        )
        url = self.urls[0]
        try:
            for attempt in retrying:
                with attempt, self._slots:
                    url = self._next_url()
                    try:
                        response = self._client.post(f"{url}/v1/chat/completions", json=payload)
                    except httpx.TransportError as exc:
                        if _is_connection_error(exc):
                            self._down_until[url] = time.monotonic() + self.down_s
                        raise
        except httpx.TimeoutException as exc:
            raise EngineOverloaded(f"timed out waiting for {url}: {exc!r}", kind="timeout") from exc
        except httpx.TransportError as exc:
            raise EngineOverloaded(
                f"engine unreachable after {self.retries + 1} attempts, last {url}: {exc!r}", kind="unavailable"
            ) from exc
        if response.status_code != 200:
            failure = classify_failure(status=response.status_code, body=response.text, url=url)
            if isinstance(failure, EngineOverloaded) and failure.kind == "unavailable":
                self._down_until[url] = time.monotonic() + self.down_s
            raise failure
        return _parse_completion(response, url=url)

    def _next_url(self) -> str:
        """The next engine in turn that is not passed over; the next in turn when every one is."""
        now = time.monotonic()
        first = None
        for _ in self.urls:
            url = self.urls[next(self._turn) % len(self.urls)]
            first = first or url
            if self._down_until.get(url, 0.0) <= now:
                return url
        return first


def _parse_completion(response: httpx.Response, *, url: str) -> _Completion:
    try:
        body = response.json()
        choice = body["choices"][0]
        usage = body.get("usage") or {}
        logprobs = (choice.get("logprobs") or {}).get("content")
        return _Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            url=url,
            logprobs=logprobs if isinstance(logprobs, list) else None,
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EngineError(f"malformed answer from {url}: {response.text[:300]}", kind="engine") from exc
