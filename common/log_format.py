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
from pathlib import Path

from common.settings import Settings

CONTEXT_FIELDS = ("job_id", "page", "page_id", "task_id", "task")
# What `ocrq serve` shows at a terminal without -v: its start-up steps and one line per ended job.
CONSOLE_LOGGER = "ocrq.console"
JOB_ENDED_LOGGER = "ocrq.jobs.ended"
# serve's own warnings (a worker that exited and is started again) are for the person at the terminal too.
SERVE_LOGGER = "ocrq.serve"
LOG_FILE_BYTES = 20 * 1024 * 1024
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


class ConsoleFilter(logging.Filter):
    """Start-up steps, ended jobs and serve's own warnings; the rest goes to the log file only."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name in (CONSOLE_LOGGER, JOB_ENDED_LOGGER) or (
            record.name == SERVE_LOGGER and record.levelno >= logging.WARNING)


def serve_logging_config(settings: Settings, *, log_dir: Path, verbose: bool) -> dict:
    """`ocrq serve`'s dictConfig: every line to a file under log_dir; at the console only ConsoleFilter's lines
    as bare messages, or with `verbose` every line in the chosen format."""
    config = logging_config(settings)
    formatter = JsonFormatter if settings.log_format == "json" else TextFormatter
    config["formatters"] |= {"bare": {"format": "%(message)s"},
                             "file": {"()": f"{__name__}.{formatter.__name__}"}}
    config["filters"]["console"] = {"()": f"{__name__}.ConsoleFilter"}
    config["handlers"] = {
        "file": {"class": "logging.handlers.RotatingFileHandler", "filename": str(log_dir / "ocrq.log"),
                 "maxBytes": LOG_FILE_BYTES, "backupCount": 3, "encoding": "utf-8", "formatter": "file",
                 "filters": ["job"]},
        "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout",
                    "formatter": "line" if verbose else "bare", "filters": ["job"] if verbose else ["console"]},
    }
    config["root"]["handlers"] = ["file", "console"]
    # httpx's request lines go to the file too; the console filter keeps them off the terminal.
    config["loggers"].pop("httpx")
    return config


def record_from_line(line: str, *, default_logger: str) -> logging.LogRecord:
    """A child process's output line as a LogRecord: a JsonFormatter line keeps its logger, level, time and
    fields; any other line (a warning printed by Python, a traceback) is an INFO record of `default_logger`."""
    try:
        fields = json.loads(line)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or not {"ts", "level", "logger", "message"} <= fields.keys():
        return logging.makeLogRecord({"name": default_logger, "levelno": logging.INFO, "levelname": "INFO",
                                      "msg": line})
    message, name, level = fields.pop("message"), fields.pop("logger"), fields.pop("level")
    if exc := fields.pop("exc", None):
        message = f"{message}\n{exc}"
    try:
        created = datetime.fromisoformat(fields.pop("ts")).timestamp()
    except (TypeError, ValueError):
        created = datetime.now(UTC).timestamp()
    levelno = logging.getLevelNamesMapping().get(level, logging.INFO)
    attrs = {k: v for k, v in fields.items() if k not in _RECORD_ATTRS}
    return logging.makeLogRecord(attrs | {"name": name, "levelname": logging.getLevelName(levelno),
                                          "levelno": levelno, "msg": message, "created": created})


def configure_logging(settings: Settings) -> None:
    """Apply logging_config; call once at each process entry (the CLI commands)."""
    logging.config.dictConfig(logging_config(settings))
