"""Logging set-up: `text` (levels and logger names, as before) or `json`, one JSON object a line
that a log shipper reads without a parser of its own. A request's line carries its request id,
the same one as its `request-id` header and any error body's `request_id`."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Literal

__all__ = ["ACCESS_LOGGER", "JsonFormatter", "LogFormat", "configure_logging"]

LogFormat = Literal["text", "json"]
ACCESS_LOGGER = "reference_server.access"
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
# What a record carries beyond the standard attributes (set through `extra=`).
_FIELDS = ("request_id", "method", "path", "route", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            if (value := getattr(record, name, None)) is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: LogFormat) -> None:
    """The root logger's one handler, on stderr; uvicorn's loggers propagate to it (the server
    passes uvicorn no logging config of its own in json mode)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Each request is logged once, by the access logger, with its request id; uvicorn's own
    # access lines say neither, so they are left out in json mode.
    logging.getLogger(ACCESS_LOGGER).disabled = fmt != "json"
