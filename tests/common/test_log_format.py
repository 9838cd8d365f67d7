"""The JSON and text log formats: context fields, extras, exceptions."""

from __future__ import annotations

import json
import logging
import sys

from common.log_format import JobContextFilter, JsonFormatter, TextFormatter, bind_job


def record(message: str, **extra) -> logging.LogRecord:
    rec = logging.LogRecord("ocrq.test", logging.WARNING, __file__, 1, message, None, None)
    rec.__dict__.update(extra)
    JobContextFilter().filter(rec)
    return rec


def test_json_lines_carry_bound_job_fields_and_extras():
    bind_job(job_id="j1", page=2)
    line = json.loads(JsonFormatter().format(record("page read", seconds=1.5)))
    assert line["message"] == "page read" and line["level"] == "WARNING" and line["logger"] == "ocrq.test"
    assert (line["job_id"], line["page"], line["seconds"]) == ("j1", 2, 1.5)
    # A field passed with extra= wins over the bound one.
    assert json.loads(JsonFormatter().format(record("other", job_id="j2")))["job_id"] == "j2"


def test_exceptions_and_text_lines():
    bind_job(job_id="j3")
    try:
        raise ValueError("bad page")
    except ValueError:
        rec = record("failed")
        rec.exc_info = sys.exc_info()
    assert "ValueError: bad page" in json.loads(JsonFormatter().format(rec))["exc"]
    text = TextFormatter().format(record("plain", data={"id": "x"}))
    assert text.split(" ", 2)[2].startswith("WARNING ocrq.test: plain job_id=j3") and "data=" not in text


def test_a_child_line_becomes_the_record_it_was_and_serve_shows_only_its_own():
    from common.log_format import ConsoleFilter, record_from_line

    line = json.dumps({"ts": "2026-12-03T08:00:00.000+00:00", "level": "WARNING", "logger": "ocrq.jobs.ended",
                       "message": "job finished  j1  a.png  1 page  2.0 s  succeeded", "job_id": "j1"})
    ended = record_from_line(line, default_logger="ocrq.worker")
    assert (ended.name, ended.levelno, ended.getMessage(), ended.job_id) == (
        "ocrq.jobs.ended", logging.WARNING, "job finished  j1  a.png  1 page  2.0 s  succeeded", "j1")
    assert ended.created == 1796284800.0
    raw = record_from_line("Traceback (most recent call last): %s", default_logger="ocrq.worker")
    assert (raw.name, raw.levelno, raw.getMessage()) == ("ocrq.worker", logging.INFO,
                                                          "Traceback (most recent call last): %s")
    shown = ConsoleFilter()
    assert shown.filter(ended) and not shown.filter(raw)
    assert not shown.filter(record_from_line(line.replace("ocrq.jobs.ended", "kombu"), default_logger="x"))
