"""Which watch streams are alive and have listed (readiness, liveness, the sync gate), and how long
a stream waits after a failed attempt (client-go's reflector backoff)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit

ListingHandler = Callable[[str, str | None, set[tuple[str, str]], str | None], None]
"""Called with a resource plural, the namespace of the watch (None: cluster-wide), the
(namespace, name) of every object of the listing and the resourceVersion of its snapshot
(None: unknown), from which the watch goes on."""


Stream = tuple[str, str | None]
"""A watch stream: the resource plural and its namespace (None: cluster-wide)."""


class WatchActivity:
    """Per watch stream: when it last showed life, and whether it has listed.

    A stream that never showed life counts as silent since :meth:`start`.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Measure silence with ``clock`` (seconds, monotonic)."""
        self._clock = clock
        self._started = clock()
        self._seen: dict[Stream, float] = {}
        self._listed: set[Stream] = set()
        self._on_listed: list[ListingHandler] = []

    def start(self) -> None:
        """The watches start now: streams not seen yet count as silent from here."""
        self._started = self._clock()

    def mark(self, resource: str, namespace: str | None) -> None:
        """Record activity on the watch of ``resource`` in ``namespace``."""
        self._seen[(resource, namespace)] = self._clock()

    def on_listed(self, handler: ListingHandler) -> None:
        """Call ``handler`` at the end of every (re)listing of any resource."""
        self._on_listed.append(handler)

    def listed(
        self,
        resource: str,
        namespace: str | None,
        keys: set[tuple[str, str]],
        resource_version: str | None = None,
    ) -> None:
        """A listing of ``resource`` in ``namespace`` ended; ``keys`` are its objects,
        ``resource_version`` its snapshot's (None: unknown)."""
        self._listed.add((resource, namespace))
        for handler in self._on_listed:
            handler(resource, namespace, keys, resource_version)

    def has_listed(self, stream: Stream) -> bool:
        """Whether ``stream`` has finished a listing."""
        return stream in self._listed

    def streams(self, resource: str, namespaces: Sequence[str]) -> list[Stream]:
        """The watch streams of ``resource`` for an operator serving ``namespaces`` (none:
        all): one cluster-wide stream, or one per namespace; kopf watches a cluster-scoped
        resource cluster-wide either way, which shows once that stream has been seen."""
        if not namespaces or (resource, None) in self._seen:
            return [(resource, None)]
        return [(resource, namespace) for namespace in namespaces]

    def silent(
        self, resources: Iterable[str], namespaces: Sequence[str], longer_than: float
    ) -> list[str]:
        """The streams of ``resources`` silent for longer than ``longer_than`` seconds, as
        "plural" (cluster-wide) or "plural in namespace"."""
        now = self._clock()
        silent = []
        for resource in sorted(resources):
            for stream in self.streams(resource, namespaces):
                if now - self._seen.get(stream, self._started) > longer_than:
                    silent.append(described(stream))
        return silent


def described(stream: Stream) -> str:
    """A stream as logs name it: "plural" (cluster-wide) or "plural in namespace"."""
    resource, namespace = stream
    return resource if namespace is None else f"{resource} in {namespace}"


class WatchBackoff:
    """How long a watch stream waits after a failed attempt before the next one.

    client-go's reflector never gives up on a watch: it waits 0.8 s, doubling up to 30 s, each
    wait plus up to as much again of jitter, and so does this, per stream, starting over at
    0.8 s once the stream has gone two minutes without a failure. A wait is never shorter than
    the ``retryAfterSeconds`` of the API server's Status, bounded by the same 30 s.
    """

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        reset_after: float = 120.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        """Waits from ``initial`` doubling up to ``cap`` seconds, back to ``initial`` after
        ``reset_after`` seconds without a failure (measured with ``clock``); ``rng`` drives
        the jitter."""
        self._initial = initial
        self._cap = cap
        self._reset_after = reset_after
        self._clock = clock
        self._rng = rng or random.Random()
        self._failed: dict[Stream, tuple[float, float]] = {}
        """Per stream: when it last failed and the wait then, before jitter."""

    def delay(self, stream: Stream, retry_after: float = 0.0) -> float:
        """The wait after a failed attempt of ``stream`` now; ``retry_after``: what the API
        server asked for."""
        now = self._clock()
        failed_at, wait = self._failed.get(stream, (-math.inf, 0.0))
        wait = self._initial if now - failed_at > self._reset_after else min(2 * wait, self._cap)
        self._failed[stream] = (now, wait)
        return max(wait * (1 + self._rng.random()), min(retry_after, self._cap))


def watched_stream(url: str) -> Stream:
    """The stream a watch URL opens: a collection URL, ``.../namespaces/<ns>/<plural>`` or
    ``.../<plural>``."""
    segments = urlsplit(url).path.rstrip("/").split("/")
    if len(segments) >= 3 and segments[-3] == "namespaces":
        return segments[-1], segments[-2]
    return segments[-1], None
