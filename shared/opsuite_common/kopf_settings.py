"""Every kopf setting opsuite relies on, chosen deliberately and explained in one place.

Operators use kopf as the watch layer only: ``on.event`` handlers that update read-only
caches and enqueue keys for a :class:`~opsuite_common.controller.Controller`. They never use
kopf's high-level ``on.create/update/delete/resume`` handlers, which store a diff-base
annotation, progress and finalizers on the watched object: a write to objects we do not own
(users' pods, source ConfigMaps, namespaces) that fails outright on large objects (kopf #1087).

Watch health: each watch request asks the API server to end it after ``server_timeout``, and
kopf reconnects when a stream has been silent for ``inactivity_timeout`` (kopf #957, #1276).
:func:`track_watch_activity` records, per watch stream (resource and namespace), the time of
every event or bookmark and of every watch request the API server ended cleanly, and
``/readyz`` fails when a stream has shown none of these for twice the watch timeout.
Bookmarks alone are not enough: the API server sends one only when its watch cache has moved
past the watch's resourceVersion, so on a quiet cluster (no change to that resource anywhere) a
healthy watch gets none at all. A stream silent for :func:`watch_dead_after` is dead: kopf's
own reconnects have failed, or its watcher task is gone (kopf never restarts a watcher that
failed, on a 403 for instance); the manager then fails ``/healthz`` and steps down. Failed
attempts that client-go's reflector retries (an ERROR event other than "410 Gone" in a watch,
a 5xx or 429 answer that outlasts kopf's own retries) end no watcher: each is logged and
waited out with the reflector's backoff (:class:`WatchBackoff`), then the watch resumes or
lists again.

Initial lists: each watch starts with a streaming list (``sendInitialEvents=true``, KEP-3157
"WatchList", what client-go's reflector does): the API server sends every object as an event
from its watch cache, on the watch's own connection, ending with a bookmark, instead of pages
of LIST that the operator requests, waits for and parses one after the other. A stream that
ends before its initial events did, or that the API server refuses (WatchList disabled; or an
ERROR event in the stream, such as "Too large resource version" when its watch cache lags),
switches the operator to paged LISTs (:data:`LIST_CHUNK_SIZE`) for good: kopf would resume
such a stream from the resourceVersion of the last object sent, which orders nothing there.

Event delivery: :func:`route_watch_events` hands each event of kopf's watch stream straight to
the operator's handler, skipping kopf's per-object workers and cause detection.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import inspect
import logging
import math
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp
import kopf
import orjson
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api, errors, fetching, watching
from kopf._cogs.structs import references
from kopf._core.reactor import queueing

from opsuite_common.options import ManagerOptions
from opsuite_common.protofields import ProtobufError
from opsuite_common.protowatch import ACCEPT, CONTENT_TYPE, Decoder
from opsuite_common.store import JSON

KOPF_SERIES = "1.45"
"""The kopf release series whose internals the patches below are written for (pyproject.toml
pins the same)."""


INACTIVITY_GRACE = 15.0
"""kopf reconnects a watch stream silent for the watch timeout plus this."""
CONNECT_TIMEOUT = 10.0
"""Seconds a watch (or any request) may take to connect."""


def watch_dead_after(watch_timeout: float) -> float:
    """Silence (s) after which a watch stream is dead: long enough for two of kopf's
    reconnects of a silent stream (each after ``watch_timeout + INACTIVITY_GRACE``, connected
    within ``CONNECT_TIMEOUT``) to have failed. 170 s for the default 60 s watch timeout."""
    return 2 * (watch_timeout + INACTIVITY_GRACE + CONNECT_TIMEOUT)


class KopfShapeError(RuntimeError):
    """The installed kopf is not the shape the patches in this module were written for."""


def _kopf_version() -> str:
    return importlib.metadata.version("kopf")


_PATCHED: tuple[tuple[str, Any, str, str, frozenset[str]], ...] = (
    ("kopf._cogs.clients.watching", watching, "infinite_watch", "an async generator function",
     frozenset({"settings", "resource", "namespace", "operator_paused"})),
    ("kopf._cogs.clients.watching", watching, "watch_objs", "an async generator function",
     frozenset({"settings", "resource", "namespace", "since", "operator_pause_waiter"})),
    ("kopf._cogs.clients.fetching", fetching, "fetch_objs", "an async generator function",
     frozenset({"settings", "resource", "namespace", "logger"})),
    ("kopf._cogs.clients.api", api, "stream", "an async generator function",
     frozenset({"url", "settings", "stopper"})),
    ("kopf._cogs.clients.errors", errors, "check_response", "a coroutine function",
     frozenset({"response"})),
    ("kopf._core.reactor.queueing", queueing, "watcher", "a coroutine function",
     frozenset({"namespace", "settings", "resource", "processor", "operator_paused",
                "operator_indexed", "resource_indexed"})),
)  # fmt: skip
"""(module, module object, function, kind, keyword parameters) of every kopf internal patched."""

_CALLED: tuple[tuple[str, Any, str, str, frozenset[str]], ...] = (
    ("kopf._cogs.clients.api", api, "request", "a coroutine function",
     frozenset({"method", "url", "payload", "headers", "timeout", "settings", "logger"})),
    ("kopf._cogs.clients.api", api, "iter_jsonlines", "an async generator function",
     frozenset({"content"})),
)  # fmt: skip
"""The same for the kopf internals the replacement of ``api.stream`` calls."""


def check_kopf_shape() -> None:
    """Fail loudly, at start-up, when kopf is not the version or shape the patches expect:
    the private functions they replace or call, their kind and parameters, and the listing
    bookmark."""
    problems = []
    version = _kopf_version()
    if version != KOPF_SERIES and not version.startswith(f"{KOPF_SERIES}."):
        problems.append(f"kopf {version} is installed; the patches are for {KOPF_SERIES}.x")
    for path, module, name, kind, params in _PATCHED + _CALLED:
        function = getattr(module, name, None)
        function = getattr(function, "__wrapped__", function)
        if function is None:
            problems.append(f"{path}.{name} is gone")
            continue
        is_kind = (
            inspect.isasyncgenfunction(function)
            if kind.endswith("async generator function")
            else inspect.iscoroutinefunction(function)
        )
        if not is_kind:
            problems.append(f"{path}.{name} is no longer {kind}")
        missing = params - set(inspect.signature(function).parameters)
        if missing:
            problems.append(f"{path}.{name} lost the parameters {', '.join(sorted(missing))}")
    if getattr(getattr(watching, "Bookmark", None), "LISTED", None) is None:
        problems.append("kopf._cogs.clients.watching.Bookmark.LISTED is gone")
    if problems:
        raise KopfShapeError("; ".join(problems))


LIST_CHUNK_SIZE = 500
"""Objects per page of an initial LIST where streaming lists are not to be had (client-go's
reflector pages by 500 too): kopf lists in one request by default, and parsing a LIST of 20,000
pods whole raises the process's memory high-water mark, which its RSS keeps, to about twice
what the cache needs."""


def configure_kopf(settings: kopf.OperatorSettings, options: ManagerOptions) -> None:
    """Apply opsuite's kopf settings for one operator process."""
    # Leader election is ours (a coordination.k8s.io Lease, see leader_election.py); kopf's
    # peering (KopfPeering objects, freezing same-priority peers) is off.
    settings.peering.standalone = True
    settings.peering.mandatory = False
    # Resources are discovered once at start-up: no cluster-wide watch of CRDs or namespaces,
    # so no RBAC for them. The CRDs are installed before the operator (Helm crds/, OLM).
    settings.scanning.disabled = True
    # No diff-base: with only on.event handlers nothing compares old and new essences, yet kopf
    # builds one (a deep copy of the object) for every event, a sixth of a busy operator's CPU.
    # Progress would go to our own status, never to annotations.
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf")
    settings.persistence.finalizer = "opsuite.dev/kopf-unused"
    # No log-to-Event posting: it would also post about objects we merely watch. Operators
    # report through status conditions and metrics.
    settings.posting.enabled = False
    # Watch streams: bounded server-side, reconnected when silent, never hanging on connect.
    settings.watching.server_timeout = int(options.watch_timeout)
    settings.watching.client_timeout = int(options.watch_timeout) + 30
    settings.watching.inactivity_timeout = options.watch_timeout + INACTIVITY_GRACE
    settings.watching.connect_timeout = CONNECT_TIMEOUT
    # Initial lists streamed from the watch cache (see the module docstring): less CPU and an
    # earlier Ready with many objects present, as Go's reference (bench/README.md).
    settings.watching.initial_streaming = True
    settings.watching.chunk_size = LIST_CHUNK_SIZE
    # A list or watch answered 429 is sent again after its Retry-After, as client-go's rest
    # client does and KubeApi does, not after kopf's own backoff (1 s growing to 21 s) when that
    # is longer: a throttled start waits no longer than the API server asks.
    settings.networking.enforce_retry_after = True
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = CONNECT_TIMEOUT
    settings.queueing.exit_timeout = 2.0
    # kopf never kills the process: the manager owns its stop (the reconciles in hand, the
    # drain of the writes, the release of the Lease), bounded by the pod's grace period.
    settings.process.ultimate_exiting_timeout = None
    # Our handlers never block; keep kopf's thread pool for sync handlers small.
    settings.execution.max_workers = 2


ListingHandler = Callable[[str, str | None, set[tuple[str, str]], str | None], None]
"""Called with a resource plural, the namespace of the watch (None: cluster-wide), the
(namespace, name) of every object of the listing and the resourceVersion of its snapshot
(None: unknown), from which the watch goes on."""


class InitialEventsIncomplete(Exception):
    """A streaming list ended, or was refused, before its initial events were all sent."""


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """A diff-base storage that keeps nothing, for operators without change-detecting handlers.

    kopf's ``on.create/update/resume`` handlers would see every object as new; opsuite uses
    ``on.event`` handlers only (see the module docstring).
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        """An empty essence: nothing is compared."""
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        """Nothing is stored, so nothing is fetched."""
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        """Store nothing."""


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


DecoderLookup = Callable[[str], Decoder | None]
"""Given a watch URL, the decoder of its protobuf stream, or None to watch it in JSON."""


def track_watch_activity(
    activity: WatchActivity,
    decoders: DecoderLookup = lambda _url: None,
    backoff: WatchBackoff | None = None,
) -> None:
    """Wrap kopf's watch streams to report listings and signs of life to ``activity``, watch
    in protobuf where ``decoders`` has a decoder for the URL, and wait out failed attempts
    (``backoff``, client-go's reflector backoff by default) instead of ending the watch.

    Every listing is reported when it ends (``WatchActivity.listed``), with the objects it held
    and its snapshot's resourceVersion (a streaming list's bookmark, or the paged list's, read
    at ``kopf._cogs.clients.fetching.fetch_objs``): kopf sends no DELETED event for objects
    deleted while a watch was down (a relist after "410 Gone"), so caches drop what a listing no
    longer holds, unless the operator wrote it after the snapshot. Every event and bookmark
    marks the watch alive (kopf filters bookmarks out before handlers run, so they are observed
    at ``kopf._cogs.clients.watching.infinite_watch``), and so does every watch request that
    the API server ends cleanly (``kopf._cogs.clients.api.stream``, used only for watches,
    running out without an error): that happens every ``server_timeout`` on a healthy
    connection even when nothing changes and no bookmark comes. A hung API server or a
    half-open connection shows neither. A streaming list that ends or is refused before its
    initial events did (``kopf._cogs.clients.watching.watch_objs``) is not resumed: the watch
    starts over with a fresh listing, in pages from then on.

    Failed attempts: kopf ends a watcher for good on an ERROR event other than "410 Gone"
    (``WatchingError``) and on a 5xx answer it has retried for 54 s, and lists again 0.1 s
    after a 429 it has retried as long; client-go's reflector retries them all, with backoff.
    Here each is logged and waited out, per stream, as :class:`WatchBackoff` says; then a
    watch resumes from the last resourceVersion kopf saw, or, if the failure came before the
    initial events ended, the listing starts over: in pages after an ERROR event (the API
    server refused the streaming list; a page of LIST can be served from etcd when its watch
    cache lags), the same request after a 5xx or 429.

    ``api.stream`` itself is kopf's rewritten to parse each line with orjson from its bytes,
    where kopf decodes the line to text for the standard library's parser, which was a large
    part of an operator's CPU until Ready with many pods present. A watch with a decoder
    asks for protobuf, else JSON (:mod:`opsuite_common.protowatch`), and reads length-prefixed
    frames unless the API server answers JSON; a frame that fails to decode ends the stream,
    and kopf resumes it (or lists again) in JSON, which that stream keeps to from then on;
    ``errors.check_response`` is wrapped to read an error answered in protobuf. kopf looks
    these functions up by module attribute at call time. Private API: kopf is pinned to
    1.45.x, the e2e suite checks that readiness holds through a quiet period and follows the
    watch (API server paused and resumed), and shared/tests/test_initial_lists.py runs the
    listings and failed attempts against a local server.
    """

    original_watch = getattr(watching.infinite_watch, "__wrapped__", watching.infinite_watch)
    original_watch_objs = getattr(watching.watch_objs, "__wrapped__", watching.watch_objs)
    original_stream = getattr(api.stream, "__wrapped__", api.stream)
    original_check = getattr(errors.check_response, "__wrapped__", errors.check_response)
    original_fetch = getattr(fetching.fetch_objs, "__wrapped__", fetching.fetch_objs)
    snapshots: dict[Stream, str] = {}  # the resourceVersion of each listing under way
    in_json: set[Stream] = set()  # streams whose protobuf failed to decode
    logger = logging.getLogger(__name__)
    backoff = backoff or WatchBackoff()

    async def back_off(stream: Stream, failure: str, details: Mapping[str, Any] | None) -> None:
        """Wait out a failed attempt of ``stream``: at least the ``retryAfterSeconds`` of the
        details of the API server's Status, if any."""
        delay = backoff.delay(stream, float((details or {}).get("retryAfterSeconds") or 0))
        logger.warning(
            "watch of %s failed: %s; trying again in %.1f s", described(stream), failure, delay
        )
        await asyncio.sleep(delay)

    def stream_of(kwargs: Mapping[str, Any]) -> Stream:
        return str(kwargs["resource"].plural), kwargs.get("namespace")

    async def infinite_watch(**kwargs: Any) -> AsyncIterator[Any]:
        watched = stream_of(kwargs)
        while True:
            listing: set[tuple[str, str]] = set()
            try:
                async for item in original_watch(**kwargs):
                    activity.mark(*watched)
                    if item is watching.Bookmark.LISTED:
                        activity.listed(*watched, listing, snapshots.pop(watched, None))
                        listing = set()
                    elif isinstance(item, dict) and item.get("type") is None:  # a listing's
                        meta = item["object"].get("metadata", {})
                        listing.add((meta.get("namespace", ""), meta.get("name", "")))
                    yield item
                return
            except InitialEventsIncomplete as exc:
                logger.warning(
                    "streaming list of %s: %s; listing in pages from now on",
                    described(watched),
                    exc,
                )
                kwargs["settings"].watching.initial_streaming = False
            except errors.APIServerError as exc:  # a page of LIST, retried by kopf, failed
                await back_off(
                    watched, f"LIST answered {exc.status}: {exc.message or exc}", exc.details
                )

    async def watch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        """kopf's watch request; raises InitialEventsIncomplete when it was a streaming list
        that ended (or was refused) before the bookmark that ends its initial events, and
        waits out a failed attempt before kopf sends the next request."""
        watched = stream_of(kwargs)
        initial = kwargs.get("since") is None and kwargs["settings"].watching.initial_streaming
        listed = not initial
        error: Mapping[str, Any] | None = None
        items = cast(AsyncGenerator[Any], original_watch_objs(**kwargs))  # see check_kopf_shape
        try:
            async with contextlib.aclosing(items):
                async for item in items:
                    if item.get("type") == "ERROR" and item["object"].get("code") != 410:
                        error = item["object"]  # kopf would raise WatchingError
                        break
                    if not listed and item.get("type") == "BOOKMARK":
                        listed = True
                        version = item["object"].get("metadata", {}).get("resourceVersion")
                        if version is not None:
                            snapshots[watched] = version
                    yield item
        except (errors.APIServerError, errors.APITooManyRequestsError) as exc:
            # Nothing of this request was yielded: kopf sends it again, resumed or not.
            await back_off(watched, f"answered {exc.status}: {exc.message or exc}", exc.details)
            return
        except errors.APIClientError as exc:
            if listed:
                raise
            raise InitialEventsIncomplete(f"refused: {exc}") from exc
        if error is not None:
            failure = f"ERROR {error.get('code')}: {error.get('message')}"
            await back_off(watched, failure, error.get("details"))
            if not listed:
                raise InitialEventsIncomplete(failure)
            return  # kopf resumes from the last resourceVersion it saw
        stopper = kwargs.get("operator_pause_waiter")
        if not listed and (stopper is None or not stopper.done()):
            raise InitialEventsIncomplete("the stream ended before its initial events did")

    async def fetch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        """kopf's paged listing; its resourceVersion (every page's) is the snapshot's."""
        async for chunk, version in original_fetch(**kwargs):
            if version is not None:
                snapshots[stream_of(kwargs)] = version
            yield chunk, version

    async def stream(
        url: str,
        *,
        settings: kopf.OperatorSettings,
        payload: object | None = None,
        headers: dict[str, str] | None = None,
        timeout: aiohttp.ClientTimeout | None = None,  # noqa: ASYNC109  # kopf's signature
        stopper: asyncio.Future[Any] | None = None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> AsyncIterator[Any]:
        """kopf's ``api.stream`` (1.45), its lines parsed by orjson from the bytes, or its
        protobuf frames decoded."""
        decoder = None if watched_stream(url) in in_json else decoders(url)
        if decoder is not None:
            headers = {**(headers or {}), "Accept": ACCEPT}

        def cancel_request(_: asyncio.Future[Any]) -> None:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()

        if stopper is not None and not stopper.done():
            stopper.add_done_callback(cancel_request)
        try:
            response = await api.request(
                method="get",
                url=url,
                payload=payload,
                headers=headers,
                timeout=timeout,
                settings=settings,
                logger=logger,
            )
        except asyncio.CancelledError:
            if stopper is not None and stopper.done():
                return
            raise  # not the stopper's cancellation
        finally:
            if stopper is not None:
                stopper.remove_done_callback(cancel_request)
        if stopper is not None and stopper.done():
            response.close()
            return

        def close_response(_: asyncio.Future[Any]) -> None:
            response.close()

        if stopper is not None:
            stopper.add_done_callback(close_response)
        try:
            async with response:
                if decoder is not None and response.content_type == CONTENT_TYPE:
                    async for frame in _frames(response.content):
                        try:
                            event = decoder.decode(frame)
                        except ProtobufError as exc:  # kopf reconnects, as after a cut
                            in_json.add(watched_stream(url))
                            logger.warning("%s: %s; watching it in JSON from now on", url, exc)
                            raise aiohttp.ClientPayloadError(str(exc)) from exc
                        yield event
                else:
                    async for line in api.iter_jsonlines(response.content):
                        yield orjson.loads(line)
        except aiohttp.ClientConnectionError:
            if stopper is None or not stopper.done():
                raise  # not the stopper's closing
            return
        finally:
            if stopper is not None:
                stopper.remove_done_callback(close_response)
        # Errors (connection reset, payload, timeouts) propagate from the stream; an ending
        # without one is the server closing the watch at its timeoutSeconds.
        if stopper is None or not stopper.done():
            activity.mark(*watched_stream(url))

    async def check_response(response: aiohttp.ClientResponse) -> None:
        """kopf's check of an answer, also for an error answered in protobuf (the Status of
        a refused watch that asked for it), which kopf would read as text and fail on: the
        same error is raised as for its JSON form."""
        decoder = None
        if response.status >= 400 and response.content_type == CONTENT_TYPE:
            decoder = decoders(str(response.url))
        if decoder is None:
            await original_check(response)
            return
        answered = _Answered(response, decoder.status(await response.read()))
        await original_check(cast(aiohttp.ClientResponse, answered))

    infinite_watch.__wrapped__ = original_watch  # type: ignore[attr-defined]
    watch_objs.__wrapped__ = original_watch_objs  # type: ignore[attr-defined]
    stream.__wrapped__ = original_stream  # type: ignore[attr-defined]
    check_response.__wrapped__ = original_check  # type: ignore[attr-defined]
    fetch_objs.__wrapped__ = original_fetch  # type: ignore[attr-defined]
    watching.infinite_watch = infinite_watch
    watching.watch_objs = watch_objs
    api.stream = stream
    errors.check_response = check_response
    fetching.fetch_objs = fetch_objs
    logger.debug("watch activity tracking installed")


class _Answered:
    """An error answer whose body is already read and decoded, as kopf's
    ``errors.check_response`` reads one; the rest (status, headers, raise_for_status) is the
    answer's own."""

    def __init__(self, response: aiohttp.ClientResponse, payload: JSON | None) -> None:
        self._response = response
        self._payload = payload

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    async def json(self) -> JSON | None:
        """The decoded Status (None when it was none)."""
        return self._payload

    async def text(self) -> str:
        """Never read: ``json()`` does not fail."""
        return ""


async def _frames(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The frames of a protobuf watch: each a 4-byte big-endian length, then the frame. Read
    as the bytes come (a few frames per read), not with two reads per frame."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer = buffer + chunk if buffer else chunk
        start, end = 0, len(buffer)
        while end - start >= 4:
            stop = start + 4 + int.from_bytes(buffer[start : start + 4], "big")
            if stop > end:
                break
            yield buffer[start + 4 : stop]
            start = stop
        buffer = buffer[start:]
    if buffer:  # the API server ends a watch between frames
        raise aiohttp.ClientPayloadError(f"watch stream cut in a frame ({len(buffer)} bytes)")


EventRoute = Callable[[str, str], Callable[[Mapping[str, Any]], None] | None]
"""Given a resource's API group and plural, the function that takes its raw watch events
(``{"type": ..., "object": ...}``; type None for a listing), or None to leave it to kopf."""


def route_watch_events(route: EventRoute) -> None:
    """Deliver the watch events of routed resources straight to their handler, in order.

    kopf gives every watched object its own worker task and queue, and runs each event through
    cause detection, per-object loggers and its handler machinery before an ``on.event``
    handler sees it: under a burst of pod events, over a third of the operator's CPU, for
    handlers that only update a cache and enqueue a key. For a routed resource, kopf's
    ``queueing.watcher`` is replaced by a loop over kopf's own watch stream (listing,
    reconnects, relists after "410 Gone" and bookmarks stay kopf's) that calls the handler
    for each event as it arrives. A handler error is logged and the stream goes on, as kopf
    does for ``on.event`` handlers. kopf looks the watcher up by module attribute when it
    spawns it (private API; kopf is pinned to 1.45.x and the e2e suite exercises every watch).
    """
    original = getattr(queueing.watcher, "__wrapped__", queueing.watcher)
    logger = logging.getLogger(__name__)

    async def watcher(
        *,
        namespace: references.Namespace,
        settings: kopf.OperatorSettings,
        resource: references.Resource,
        processor: queueing.WatchStreamProcessor,
        operator_paused: aiotoggles.ToggleSet | None = None,
        operator_indexed: aiotoggles.ToggleSet | None = None,
        resource_indexed: aiotoggles.Toggle | None = None,
    ) -> None:
        deliver = route(resource.group, resource.plural)
        if deliver is None:
            await original(
                namespace=namespace,
                settings=settings,
                resource=resource,
                processor=processor,
                operator_paused=operator_paused,
                operator_indexed=operator_indexed,
                resource_indexed=resource_indexed,
            )
            return
        stream = watching.infinite_watch(
            settings=settings,
            resource=resource,
            namespace=namespace,
            operator_paused=operator_paused,
        )
        async for raw_event in stream:
            if isinstance(raw_event, watching.Bookmark):
                if operator_indexed is not None and resource_indexed is not None:
                    await operator_indexed.drop_toggle(resource_indexed)
                continue
            if raw_event.get("type") == "BOOKMARK":
                continue
            try:
                deliver(raw_event)
            except Exception:
                logger.exception("%s event handler failed; event ignored", resource.plural)

    watcher.__wrapped__ = original  # type: ignore[attr-defined]
    queueing.watcher = watcher
