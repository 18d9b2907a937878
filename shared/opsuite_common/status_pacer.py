"""Status writes paced per object: at most one per ``interval``, and never a lost last one.

During a burst (hundreds of pods matched within a second) every pass of a controller changes
its object's status a little (counts, per-pod states), and writing each is what costs the API
server the most: a status PATCH of a custom resource is a schema validation, a managedFields
update and a watch event to every watcher. The controller asks :meth:`StatusPacer.delay`
before writing; when a write is due later, it skips this one and requeues the object for then,
so the status is at most ``interval`` behind and the final state is always written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

STATUS_INTERVAL = 1.0
"""Seconds between two status writes of one object (a write after a quiet spell is at once)."""


class StatusPacer:
    """The time of each object's last status write."""

    def __init__(
        self, interval: float = STATUS_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval = interval
        self._clock = clock
        self._written: dict[Hashable, float] = {}

    def delay(self, key: Hashable) -> float:
        """Seconds until the status of ``key`` may be written again (0: now)."""
        last = self._written.get(key)
        if last is None:
            return 0.0
        return max(0.0, last + self._interval - self._clock())

    def wrote(self, key: Hashable) -> None:
        """The status of ``key`` was just written."""
        self._written[key] = self._clock()

    def forget(self, key: Hashable) -> None:
        """The object is gone."""
        self._written.pop(key, None)
