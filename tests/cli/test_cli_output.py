"""What the CLI prints: error sentences (never a Python repr), the --out summary, the progress bar's ETA."""

from __future__ import annotations

from pathlib import Path

import httpx
from rich.console import Console

from cli import connect, submit
from ocrq.client import OcrqError


def test_a_refusal_reads_as_the_apis_code_and_sentence():
    body = {"detail": [{"type": "literal_error", "loc": ["query", "format"],
                        "msg": "Input should be 'markdown', 'text' or 'json'", "input": "pdf"}]}
    message = OcrqError.from_response(httpx.Response(422, json=body)).message
    assert message == "format: Input should be 'markdown', 'text' or 'json'"
    assert "{" not in message and "[" not in message
    refused = OcrqError.from_response(httpx.Response(404, json={"code": "not_found", "detail": "no such job"}))
    assert connect.explain(refused, url="http://h", about="abc") == "abc: 404 not_found: no such job"
    proxy = OcrqError.from_response(httpx.Response(502, text="<html>bad gateway</html>"))
    assert (proxy.code, proxy.message) == ("http_502", "<html>bad gateway</html>")
    assert connect.explain(OcrqError(401, "unauthorized", "bad key"), url="http://h").startswith(
        "the API key was refused: pass --key")
    assert connect.explain(OcrqError(None, "unreachable", "ConnectError"), url="http://h") == (
        "cannot reach ocrq at http://h: is `ocrq serve` (or `ocrq api`) running?")


def test_the_url_recorded_by_serve_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("OCRQ_HOME", str(tmp_path))
    monkeypatch.delenv("OCRQ_URL", raising=False)
    from common.settings import get_settings
    get_settings.cache_clear()
    try:
        assert connect.default_url() == "http://127.0.0.1:8000"
        connect.url_file().write_text("http://127.0.0.1:8790\n")
        assert connect.connect().url == "http://127.0.0.1:8790"
        monkeypatch.setenv("OCRQ_URL", "http://127.0.0.1:9000")
        assert connect.connect().url == "http://127.0.0.1:9000"
        assert connect.connect(url="http://h:1/").url == "http://h:1"
    finally:
        get_settings.cache_clear()


def test_eta_comes_from_the_pace_so_far():
    assert submit.eta_seconds(elapsed=10.0, done=2, total=6) == 20.0
    assert submit.eta_seconds(elapsed=10.0, done=0, total=6) is None
    assert submit.eta_seconds(elapsed=10.0, done=3, total=None) is None
    assert submit.eta_seconds(elapsed=10.0, done=6, total=6) == 0.0


def test_the_bar_shows_an_eta_once_a_page_is_done():
    console = Console(record=True, width=120, force_terminal=False)
    progress = submit.Progress(submit.TextColumn("{task.description}"), submit.EtaColumn(), console=console)
    task = progress.add_task("jobs", total=4)
    progress.start_task(task)
    progress.update(task, completed=1)
    rendered = progress.columns[1].render(progress.tasks[0]).plain
    assert rendered.startswith("ETA ") and rendered != "ETA …" and "-:--" not in rendered


def test_the_out_summary_names_what_was_written_and_what_was_not():
    text = submit.summary(out=Path("results"), written=[Path("results/a.png.md")],
                          not_read=[Path("docs/b.pdf")], rejected=[Path("docs/c.txt")])
    assert text.splitlines() == ["wrote 1 of 3 result(s) to results/", "  a.png.md",
                                 "not read (1): docs/b.pdf", "rejected (1): docs/c.txt"]
