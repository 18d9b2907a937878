"""Follow the pods of one namespace through a raw watch stream and time milestones.

A background thread lists the namespace's pods and then watches them, parsing the JSON events
itself (the client's model deserialisation is far too slow for thousands of events). Each event
is stamped with ``time.monotonic()`` when its line arrives. A :class:`Milestone` is a predicate
over the pod counts, armed before the action it times; the tracker records the first instant it
holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from kubernetes import client

from bench.plane import READ_TIMEOUT
from bench.rawwatch import RawWatch
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


class PodTracker(RawWatch):
    """Pods of one namespace as the watch delivers them; start it, then arm milestones."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        path = resource_path("v1", "pods", namespace)
        super().__init__(api, path, {}, f"pod watch of {namespace}", list_timeout=READ_TIMEOUT)
        self.namespace = namespace
        self._phase: dict[str, str] = {}
        """Pod name -> phase, or "Terminating" once a deletionTimestamp is set."""
        self._added: set[str] = set()
        self._milestones: list[Milestone] = []

    # ------------------------------------------------------------------ public

    def start(self, timeout: float = 30.0) -> Self:
        """Start following the namespace; return once the initial list is loaded."""
        return super().start(timeout)

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

    @staticmethod
    def _phase_of(pod: dict[str, Any]) -> str:
        if (pod.get("metadata") or {}).get("deletionTimestamp") is not None:
            return "Terminating"
        return str((pod.get("status") or {}).get("phase") or "Pending")

    def _apply(self, kind: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if kind == "DELETED":
            self._phase.pop(name, None)
        else:
            if name not in self._phase:
                self._added.add(name)
            self._phase[name] = self._phase_of(obj)
        self._changed(at)

    def _replace(self, items: list[dict[str, Any]], at: float) -> None:
        fresh = {pod["metadata"]["name"]: self._phase_of(pod) for pod in items}
        if self._synced.is_set():
            self._added.update(set(fresh) - set(self._phase))
        self._phase = fresh
        self._changed(at)
