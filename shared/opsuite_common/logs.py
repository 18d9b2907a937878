"""Logging set-up: one JSON object per line (default) or plain text, on stderr. Every line
logged during a reconcile, by any module, carries controller-runtime's fields for it:
``controller``, ``namespace``, ``name`` and ``reconcileID`` (:func:`reconciling`)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


_RECONCILE: ContextVar[dict[str, str] | None] = ContextVar("reconcile", default=None)


@contextlib.contextmanager
def reconciling(controller: str, key: tuple[str, str]) -> Iterator[None]:
    """The reconcile of ``key`` by ``controller``, with an id of its own, for what is logged
    meanwhile in this task (and the tasks it starts)."""
    namespace, name = key
    token = _RECONCILE.set(
        {
            "controller": controller,
            "namespace": namespace,
            "name": name,
            "reconcileID": str(uuid.uuid4()),
        }
    )
    try:
        yield
    finally:
        _RECONCILE.reset(token)


class ReconcileFields(logging.Filter):
    """Puts the fields of the reconcile in progress on each record, as its ``reconcile``
    attribute (a record's own ``name`` is its logger's); :class:`JsonFormatter` writes them
    where the record has no field of the same name."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _RECONCILE.get()
        if fields is not None and not hasattr(record, "reconcile"):
            record.reconcile = fields
        return True


class JsonFormatter(logging.Formatter):
    """Render a record as JSON with ts, level, logger, msg and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "reconcile" and not key.startswith("_"):
                entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        for key, value in getattr(record, "reconcile", {}).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(log_format: str, level: str) -> None:
    """Route all logging (kopf's included) to stderr in the chosen format and level."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ReconcileFields())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf reports every handler run at info ("Handler 'watch-pods' succeeded"): one line per
    # watch event. Keep those for --log-level=debug.
    if root.level > logging.DEBUG:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
