"""Everything of opsuite that touches kopf: its settings, its run loop, and the private functions
of kopf that opsuite replaces, installed by one call at process start (:func:`install`).

Operators use kopf as the watch layer only: ``on.event`` handlers that update read-only
caches and enqueue keys for a :class:`~opsuite_common.controller.Controller`. They never use
kopf's high-level ``on.create/update/delete/resume`` handlers, which store a diff-base
annotation, progress and finalizers on the watched object: a write to objects we do not own
(users' pods, source ConfigMaps, namespaces) that fails outright on large objects (kopf #1087).

Watch health: each watch request asks the API server to end it after ``server_timeout``, and
kopf reconnects when a stream has been silent for ``inactivity_timeout`` (kopf #957, #1276).
:mod:`.listing` and :mod:`.streams` record, per watch stream (resource and namespace), the time
of every event or bookmark and of every watch request the API server ended cleanly, and
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

Event delivery: :mod:`.routing` hands each event of kopf's watch stream straight to
the operator's handler, skipping kopf's per-object workers and cause detection.

Modules: :mod:`.settings` (kopf's settings), :mod:`.runner` (registry, login, kopf's tasks),
:mod:`.hooks` (what the replaced functions report to and ask of the process: one object, the
manager), :mod:`.activity` (watch streams' life and backoff, no kopf), :mod:`.listing` (kopf's
listings and watch requests wrapped), :mod:`.streams` (kopf's reading of a watch replaced),
:mod:`.frames` (protobuf frames), :mod:`.routing` (events to the handler), :mod:`.shape` (the
kopf version and private functions checked at start-up). Each private symbol of kopf used here
is listed, with why, in docs/architecture.md ("kopf behind one seam").
"""

from __future__ import annotations

from opsuite_common.kopfwatch.activity import WatchBackoff
from opsuite_common.kopfwatch.hooks import WatchHooks
from opsuite_common.kopfwatch.listing import install_listing
from opsuite_common.kopfwatch.routing import install_routing
from opsuite_common.kopfwatch.shape import check_kopf_shape
from opsuite_common.kopfwatch.streams import install_streams


def install(hooks: WatchHooks, *, backoff: WatchBackoff | None = None) -> None:
    """Check kopf's shape, then put opsuite's functions in kopf's place (:mod:`.listing`,
    :mod:`.streams`, :mod:`.routing`), reporting to and asking of ``hooks`` (the manager),
    waiting out failed watch attempts as ``backoff`` says (client-go's reflector backoff by
    default). Called once, at process start, before kopf runs, and by the tests that need the
    patches; calling it again replaces the hooks (kopf's own functions are wrapped, never
    ours)."""
    check_kopf_shape()
    install_listing(hooks, backoff)
    install_streams(hooks)
    install_routing(hooks)
