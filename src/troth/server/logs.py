"""How ``troth serve`` writes its log: one line per record on stderr, as text or as JSON.

``configure`` installs one handler on the root logger, so troth's loggers and uvicorn's
(``uvicorn.error``) all come out in the chosen format. A line about a promise, task or
schedule carries its id: the call names it in the message and passes it as a field
(``extra={TASK_ID: id}``), and a line logged while ``POST /`` serves a request gets that
request's ids (``serving``) without the call having to know them. In JSON the ids are
fields; in text a line whose message does not already show an id gets it appended
(``[task_id=...]``). docs/logging.md has the formats and what each warning means.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from contextvars import ContextVar
from typing import Any

from troth.protocol.envelope import Request
from troth.protocol.subjects import ID_FIELDS, subject_ids

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# A record's own attributes; anything else on it was passed as ``extra`` and is a field.
# uvicorn's ``color_message`` is its message again, with terminal colours.
_RECORD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}

# The request ``POST /`` is serving in this asyncio task (each request has its own task,
# whose context the calls it awaits share). Set once per request; read only to log.
_serving: ContextVar[Request | None] = ContextVar("troth_serving", default=None)


def serving(request: Request) -> None:
    """Mark ``request`` as the one this task serves, for the lines logged while it runs."""
    _serving.set(request)


def served() -> Request | None:
    """The request this task served, if it decoded (the access log reads it)."""
    return _serving.get()


class _RequestIds(logging.Filter):
    """Gives a record the ids of the request being served, unless it names its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = _serving.get()
        if request is not None and not any(hasattr(record, f) for f in ID_FIELDS):
            for field, id in subject_ids(request.data).items():
                setattr(record, field, id)
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, then the ids the message does not show."""

    def __init__(self) -> None:
        super().__init__(TEXT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        missing = [
            f"{field}={id}"
            for field in ID_FIELDS
            if (id := getattr(record, field, None)) is not None and str(id) not in record.message
        ]
        return f"{line} [{' '.join(missing)}]" if missing else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, every field passed as ``extra`` (the ids among them), and ``exception``
    (the traceback as one string) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {
            "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _RECORD:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str)


def configure(level: str, format: str) -> None:
    """Log records of ``level`` and above to stderr in ``format`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    handler.addFilter(_RequestIds())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
