"""A collection followed in a background thread: list, then watch from the list's
resourceVersion through a raw stream (bench.plane.watch_events), list again after an error.

Subclasses keep the state: :meth:`RawWatch._replace` takes a fresh list, :meth:`RawWatch._apply`
one event (both stamped with ``time.monotonic()`` when the data arrived). bench.objwatch and
bench.podwatch build on it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from typing import Any, Self

from kubernetes import client

from bench.plane import read, request, watch_events

log = logging.getLogger(__name__)


class RawWatch:
    """One collection ``path`` (with ``query``) followed by a thread; ``what`` names it."""

    def __init__(
        self,
        api: client.ApiClient,
        path: str,
        query: dict[str, str],
        what: str,
        list_timeout: float,
    ) -> None:
        self._api = api
        self._path = path
        self._query = query
        self._what = what
        self._list_timeout = list_timeout
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=what, daemon=True)
        self.events = 0

    def start(self, timeout: float) -> Self:
        """Start following; return once the initial list is loaded."""
        self._thread.start()
        if not self._synced.wait(timeout):
            raise TimeoutError(f"{self._what} not synced after {timeout:.0f} s")
        return self

    def stop(self) -> None:
        """Stop the watch thread. Closing the response would wait for the blocked read;
        shutting its socket down ends that read at once."""
        self._stopping.set()
        sock = getattr(getattr(self._response, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def _replace(self, items: list[dict[str, Any]], at: float) -> None:
        """Replace the state with a fresh list; caller holds the lock."""
        raise NotImplementedError

    def _apply(self, kind: str, obj: dict[str, Any], at: float) -> None:
        """Apply one ADDED, MODIFIED or DELETED event; caller holds the lock."""
        raise NotImplementedError

    def _list(self) -> str:
        """Replace the state with a fresh list; its resourceVersion."""
        response = request(
            self._api, "GET", self._path, query=self._query, timeout=(5, self._list_timeout)
        )
        body = json.loads(read(response))
        at = time.monotonic()
        with self._lock:
            self._replace(body.get("items") or [], at)
        version: str = body["metadata"]["resourceVersion"]
        return version

    def _hold(self, response: Any) -> None:
        self._response = response

    def _run(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._list()
                    self._synced.set()
                for at, event in watch_events(
                    self._api, self._path, self._query, version, self._hold
                ):
                    kind, obj = event.get("type", ""), event.get("object") or {}
                    if kind == "ERROR":  # 410 Gone: the version is too old; list again
                        version = None
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind == "BOOKMARK":
                        continue
                    with self._lock:
                        self.events += 1
                        self._apply(kind, obj, at)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                log.debug("%s interrupted (%s); listing again", self._what, exc)
                version = None
                time.sleep(0.2)
