"""Follow the pods of one namespace through a raw watch stream and time milestones.

A background thread lists the namespace's pods and then watches them, parsing the JSON events
itself (the client's model deserialisation is far too slow for thousands of events). Each event
is stamped with ``time.monotonic()`` when its line arrives. A :class:`Milestone` is a predicate
over the pod counts, armed before the action it times; the tracker records the first instant it
holds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from bench.plane import READ_TIMEOUT, read, request, watch_events
from opsuite_common.kube import resource_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PodCounts:
    """Pods of a namespace at one instant, and how many were ever added since tracking began."""

    existing: int
    """Pods present in the API (terminating ones included)."""
    running: int
    """Pods with status.phase Running and no deletionTimestamp."""
    added: int
    """Distinct pods seen appear since the tracker started."""


Predicate = Callable[[PodCounts], bool]


class Milestone:
    """The first instant (monotonic seconds) at which a predicate over the counts held."""

    def __init__(self, description: str, predicate: Predicate) -> None:
        self.description = description
        self.predicate = predicate
        self.reached_at: float | None = None
        self._event = threading.Event()

    def check(self, counts: PodCounts, at: float) -> None:
        """Record ``at`` the first time ``counts`` satisfy the predicate."""
        if self.reached_at is None and self.predicate(counts):
            self.reached_at = at
            self._event.set()

    def wait(self, timeout: float) -> float:
        """Block until reached; the instant. Raises TimeoutError after ``timeout`` seconds."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"not reached within {timeout:.0f} s: {self.description}")
        assert self.reached_at is not None
        return self.reached_at


class PodTracker:
    """Pods of one namespace as the watch delivers them; start it, then arm milestones."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self._api = api
        self._path = resource_path("v1", "pods", namespace)
        self.namespace = namespace
        self._lock = threading.Lock()
        self._phase: dict[str, str] = {}
        """Pod name -> phase, or "Terminating" once a deletionTimestamp is set."""
        self._added: set[str] = set()
        self._milestones: list[Milestone] = []
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"podwatch-{namespace}", daemon=True)
        self.error: BaseException | None = None
        self.events = 0

    # ------------------------------------------------------------------ public

    def start(self, timeout: float = 30.0) -> PodTracker:
        """Start following the namespace; return once the initial list is loaded."""
        self._thread.start()
        if not self._synced.wait(timeout):
            raise TimeoutError(f"pod watch of {self.namespace} not synced after {timeout:.0f} s")
        return self

    def stop(self) -> None:
        """Stop the watch thread (closes the open stream)."""
        self._stopping.set()
        response = self._response
        connection = getattr(response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            # Closing the response would wait for the blocked read; shutting the socket
            # down ends that read at once.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def counts(self) -> PodCounts:
        """The current counts."""
        with self._lock:
            return self._counts()

    def arm(self, description: str, predicate: Predicate) -> Milestone:
        """A milestone checked on every event from now on (and against the current counts)."""
        milestone = Milestone(description, predicate)
        with self._lock:
            milestone.check(self._counts(), time.monotonic())
            if milestone.reached_at is None:
                self._milestones.append(milestone)
        return milestone

    def reset_added(self) -> None:
        """Start counting ``added`` from zero (at the start of a timed phase)."""
        with self._lock:
            self._added.clear()

    # ------------------------------------------------------------------ internals

    def _counts(self) -> PodCounts:
        running = sum(1 for phase in self._phase.values() if phase == "Running")
        return PodCounts(len(self._phase), running, len(self._added))

    def _changed(self, at: float) -> None:
        """Check armed milestones; caller holds the lock."""
        if not self._milestones:
            return
        counts = self._counts()
        for milestone in self._milestones:
            milestone.check(counts, at)
        self._milestones = [m for m in self._milestones if m.reached_at is None]

    def _apply(self, event_type: str, pod: dict[str, Any], at: float) -> None:
        meta = pod.get("metadata") or {}
        name = meta.get("name")
        if not name:
            return
        with self._lock:
            if event_type == "DELETED":
                self._phase.pop(name, None)
            else:
                if name not in self._phase:
                    self._added.add(name)
                deleting = meta.get("deletionTimestamp") is not None
                phase = (pod.get("status") or {}).get("phase") or "Pending"
                self._phase[name] = "Terminating" if deleting else phase
            self.events += 1
            self._changed(at)

    def _list(self) -> str:
        """Replace the state with a fresh list; its resourceVersion."""
        response = request(self._api, "GET", self._path, timeout=(5, READ_TIMEOUT))
        body = json.loads(read(response))
        at = time.monotonic()
        with self._lock:
            fresh: dict[str, str] = {}
            for pod in body.get("items") or []:
                meta = pod["metadata"]
                phase = (pod.get("status") or {}).get("phase") or "Pending"
                fresh[meta["name"]] = (
                    "Terminating" if meta.get("deletionTimestamp") is not None else phase
                )
            if self._synced.is_set():
                self._added.update(set(fresh) - set(self._phase))
            self._phase = fresh
            self._changed(at)
        version: str = body["metadata"]["resourceVersion"]
        return version

    def _watch(self, resource_version: str) -> Iterator[tuple[float, dict[str, Any]]]:
        return watch_events(self._api, self._path, {}, resource_version, self._hold)

    def _hold(self, response: Any) -> None:
        self._response = response

    def _run(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._list()
                    self._synced.set()
                for at, event in self._watch(version):
                    kind, obj = event.get("type", ""), event.get("object") or {}
                    if kind == "ERROR":  # 410 Gone: the version is too old; list again
                        version = None
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind != "BOOKMARK":
                        self._apply(kind, obj, at)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                log.debug("pod watch of %s interrupted (%s); listing again", self.namespace, exc)
                self.error = exc
                version = None
                time.sleep(0.2)
