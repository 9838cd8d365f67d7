"""Log lines as JSON (or text) that carry the job, page and Celery task they are about.

Code that works on a job calls `bind_job(job_id=..., page=...)` once it knows them; every line logged
afterwards in the same Celery task carries them, and the task id, without passing `extra=` around.
"""

from __future__ import annotations

import json
import logging
import logging.config
from contextvars import ContextVar
from datetime import UTC, datetime

from common.settings import Settings

CONTEXT_FIELDS = ("job_id", "page", "page_id", "task_id", "task")
# What bind_job recorded, and the task it was recorded in: a later task in the same process must not inherit it.
_job_context: ContextVar[tuple[str | None, dict]] = ContextVar("ocrq_job_context", default=(None, {}))
# Attributes every LogRecord has; anything else on a record came from `extra=` and is worth printing.
# uvicorn's color_message repeats the message with terminal colours.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime",
                                                                                   "color_message"}


def _current_task():
    from celery import current_task

    return current_task if current_task else None


def bind_job(**fields) -> None:
    """Attach job_id, page, page_id... to every later line of the current task (or, outside a task, context)."""
    task = _current_task()
    task_id = task.request.id if task else None
    previous_task, previous = _job_context.get()
    merged = (previous if previous_task == task_id else {}) | {k: v for k, v in fields.items() if v is not None}
    _job_context.set((task_id, merged))


class JobContextFilter(logging.Filter):
    """Copies the Celery task and the bound job fields onto each record; fields passed with extra= win."""

    def filter(self, record: logging.LogRecord) -> bool:
        task = _current_task()
        task_id = task.request.id if task else None
        if task:
            _set_default(record, "task_id", task_id)
            _set_default(record, "task", task.name)
        elif isinstance(record.args, dict) and "id" in record.args and "name" in record.args:
            # Celery's own "Task x[id] succeeded" lines, logged once the task context is gone.
            _set_default(record, "task_id", record.args["id"])
        bound_task, fields = _job_context.get()
        if fields and bound_task == task_id:
            for name, value in fields.items():
                _set_default(record, name, value)
        return True


def _set_default(record: logging.LogRecord, name: str, value) -> None:
    if getattr(record, name, None) is None:
        setattr(record, name, value)


def record_fields(record: logging.LogRecord) -> dict:
    """The context and extra= fields of a record, in a stable order."""
    fields = {name: getattr(record, name) for name in CONTEXT_FIELDS if getattr(record, name, None) is not None}
    for name, value in vars(record).items():
        if name not in _RECORD_ATTRS and name not in fields and not name.startswith("_") and value is not None:
            fields[name] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, then job_id, page, task_id and any extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line |= record_fields(record)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """A readable line for a terminal, with the same fields as key=value after the message."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        # Structured values (Celery's `data` dict) belong in JSON lines; a terminal gets the scalars.
        fields = {k: v for k, v in record_fields(record).items() if not isinstance(v, dict | list)}
        if not fields:
            return line
        head, sep, tail = line.partition("\n")
        return head + " " + " ".join(f"{k}={v}" for k, v in fields.items()) + sep + tail


def logging_config(settings: Settings) -> dict:
    """A dictConfig: one stderr handler with the chosen format for every logger; uvicorn takes it as log_config."""
    formatter = JsonFormatter if settings.log_format == "json" else TextFormatter
    own_handlers_off = {"handlers": [], "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"job": {"()": f"{__name__}.JobContextFilter"}},
        "formatters": {"line": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "line", "filters": ["job"]}},
        "root": {"handlers": ["stderr"], "level": settings.log_level.upper()},
        "loggers": {
            "uvicorn": own_handlers_off, "uvicorn.error": own_handlers_off, "uvicorn.access": own_handlers_off,
            "celery": own_handlers_off,
            # One INFO line per HTTP request the engines and webhooks make would drown everything else.
            "httpx": {"level": "WARNING"},
        },
    }


def configure_logging(settings: Settings) -> None:
    """Apply logging_config; call once at each process entry (the CLI commands)."""
    logging.config.dictConfig(logging_config(settings))
