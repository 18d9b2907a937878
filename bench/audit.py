"""Count API requests from the API server's audit log (JSON lines, Metadata level).

:class:`AuditTail` follows the log from the moment it is created, across rotations (it keeps the
open file, so a rotated file is read to its end before the new one), and keeps only the events
whose line mentions a given token (the benchmark's namespaces all carry the run's id). Events are
deduplicated by auditID: a watch is logged at ResponseStarted and again at ResponseComplete.

The API server writes the log in batches (``--audit-log-mode=batch``): :meth:`AuditTail.flush`
sends a marker request, reads its ``Audit-Id`` response header and reads the log until that
event is there, so every request completed before it has been written too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from kubernetes import client

from bench.plane import read, request
from opsuite_common.kube import resource_path


@dataclass(frozen=True)
class AuditEvent:
    """One API request as the audit log recorded it."""

    audit_id: str
    received: float
    """requestReceivedTimestamp, seconds since the epoch."""
    username: str
    user_agent: str
    verb: str
    resource: str
    """resource, with "/subresource" when there is one."""
    namespace: str
    code: int


Actor = Callable[[AuditEvent], bool]


def _parse(line: str) -> AuditEvent | None:
    try:
        raw: dict[str, Any] = json.loads(line)
    except json.JSONDecodeError:
        return None
    ref = raw.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    received = datetime.fromisoformat(raw["requestReceivedTimestamp"]).timestamp()
    return AuditEvent(
        audit_id=raw.get("auditID", ""),
        received=received,
        username=(raw.get("user") or {}).get("username", ""),
        user_agent=raw.get("userAgent", ""),
        verb=raw.get("verb", ""),
        resource=resource,
        namespace=ref.get("namespace", ""),
        code=int((raw.get("responseStatus") or {}).get("code") or 0),
    )


_RECEIVED = '"requestReceivedTimestamp":"'


class AuditTail:
    """Audit events mentioning ``token``, from the current end of the log onwards."""

    def __init__(self, path: Path, token: str) -> None:
        self.path = path
        self.token = token
        self._file: IO[str] = path.open(errors="replace")
        self._file.seek(0, os.SEEK_END)
        self._partial = ""
        self.events: dict[str, AuditEvent] = {}
        self.received: list[float] = []
        """When each logged request (anyone's) was received: a gap means a stalled server."""

    def close(self) -> None:
        """Close the log file."""
        self._file.close()

    def _read_open_file(self) -> None:
        chunk = self._file.read()
        if not chunk:
            return
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        for line in lines:
            start = line.find(_RECEIVED)
            if start >= 0:
                start += len(_RECEIVED)
                stamp = line[start : line.find('"', start)]
                with contextlib.suppress(ValueError):
                    self.received.append(datetime.fromisoformat(stamp).timestamp())
            if self.token not in line:
                continue
            event = _parse(line)
            if event is not None and event.audit_id not in self.events:
                self.events[event.audit_id] = event

    def poll(self) -> None:
        """Read what was appended since the last poll (following a rotation)."""
        self._read_open_file()
        try:
            rotated = os.stat(self.path).st_ino != os.fstat(self._file.fileno()).st_ino
        except FileNotFoundError:
            return
        if rotated:
            self._read_open_file()
            self._file.close()
            self._file = self.path.open(errors="replace")
            self._partial = ""
            self._read_open_file()

    def flush(self, api: client.ApiClient, namespace: str, timeout: float = 30.0) -> None:
        """Make a request in ``namespace`` and read the log until it appears there."""
        response = request(api, "GET", resource_path("v1", "namespaces", None, namespace))
        read(response)
        marker = response.headers.get("Audit-Id")
        if not marker:
            raise RuntimeError("the API server sent no Audit-Id header; is auditing on?")
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if marker in self.events:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"audit event {marker} not in {self.path} after {timeout} s")
            time.sleep(0.2)

    def longest_silence(self, start: float, end: float) -> float:
        """Longest span in [start, end] (epoch seconds) in which no request arrived, seconds.

        The plane always has traffic (and a benchmark trial a lot), so a long silence means the
        API server was stalled (the e2e chaos test stops it with SIGSTOP).
        """
        times = sorted(t for t in self.received if start <= t <= end)
        return max((b - a for a, b in itertools.pairwise([start, *times, end])), default=0.0)

    def select(self, namespace: str, actor: Actor, start: float, end: float) -> list[AuditEvent]:
        """Requests by ``actor`` in ``namespace`` received in [start, end] (epoch seconds)."""
        return [
            e
            for e in self.events.values()
            if e.namespace == namespace and start <= e.received <= end and actor(e)
        ]


def breakdown(events: Iterable[AuditEvent]) -> Counter[str]:
    """Requests counted by "verb resource" (e.g. "create pods", "patch podsets/status")."""
    return Counter(f"{e.verb} {e.resource}" for e in events)


def span(
    events: Iterable[AuditEvent], verb: str, resource: str, since: float
) -> tuple[float, float] | None:
    """Seconds from ``since`` to the first and the last ``verb resource`` request, if any."""
    times = [e.received for e in events if e.verb == verb and e.resource == resource]
    if not times:
        return None
    return min(times) - since, max(times) - since


def by_user_agent(prefix: str) -> Actor:
    """Requests whose User-Agent starts with ``prefix``."""
    return lambda e: e.user_agent.startswith(prefix)


def by_user(username: str) -> Actor:
    """Requests authenticated as ``username``."""
    return lambda e: e.username == username


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def request_summary(events: Iterable[AuditEvent]) -> dict[str, Any]:
    """Requests by verb, by "verb resource (User-Agent product)", and the write/list totals."""
    events = list(events)
    verbs = Counter(e.verb for e in events)
    detail = Counter(
        f"{e.verb} {e.resource or '(non-resource)'} ({e.user_agent.split('/', 1)[0]})"
        for e in events
    )
    return {
        "total": len(events),
        "by_verb": dict(verbs.most_common()),
        "by_request": dict(detail.most_common()),
        "writes": sum(n for verb, n in verbs.items() if verb in WRITE_VERBS),
        "lists": verbs.get("list", 0),
        "watches": verbs.get("watch", 0),
    }


def in_window(
    events: Iterable[AuditEvent], actor: Actor, start: float, end: float
) -> list[AuditEvent]:
    """Requests by ``actor`` received in [start, end] (epoch seconds), any namespace."""
    return [e for e in events if start <= e.received <= end and actor(e)]


def by_user_prefix(*prefixes: str) -> Actor:
    """Requests authenticated as a user whose name starts with one of ``prefixes``."""
    return lambda e: e.username.startswith(prefixes)
