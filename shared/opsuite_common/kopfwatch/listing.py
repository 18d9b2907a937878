"""kopf's listings and watch requests, wrapped (see :func:`install_listing`): listings and signs
of life reported, streaming lists, failed attempts waited out as client-go's reflector does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, cast

from kopf._cogs.clients import errors, fetching, watching

from opsuite_common.kopfwatch.activity import Stream, WatchBackoff, described
from opsuite_common.kopfwatch.hooks import WatchHooks
from opsuite_common.kopfwatch.shape import unwrapped, wrapping


class InitialEventsIncomplete(Exception):
    """A streaming list ended, or was refused, before its initial events were all sent."""


def install_listing(hooks: WatchHooks, backoff: WatchBackoff | None = None) -> None:
    """Wrap kopf's listings and watch requests to report listings and signs of life to
    ``hooks.activity`` and wait out failed attempts (``backoff``, client-go's reflector backoff
    by default) instead of ending the watch.

    Every listing is reported when it ends (``WatchActivity.listed``), with the objects it held
    and its snapshot's resourceVersion (a streaming list's bookmark, or the paged list's, read
    at ``kopf._cogs.clients.fetching.fetch_objs``): kopf sends no DELETED event for objects
    deleted while a watch was down (a relist after "410 Gone"), so caches drop what a listing no
    longer holds, unless the operator wrote it after the snapshot. Every event and bookmark
    marks the watch alive (kopf filters bookmarks out before handlers run, so they are observed
    at ``kopf._cogs.clients.watching.infinite_watch``; a watch request the API server ends
    cleanly counts too, :mod:`.streams`). A streaming list that ends or is refused before its
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

    kopf looks these functions up by module attribute at call time. Private API: kopf is
    pinned to 1.45.x, the e2e suite checks that readiness holds through a quiet period and
    follows the watch (API server paused and resumed), and shared/tests/test_initial_lists.py
    runs the listings and failed attempts against a local server.
    """

    original_watch = unwrapped(watching.infinite_watch)
    original_watch_objs = unwrapped(watching.watch_objs)
    original_fetch = unwrapped(fetching.fetch_objs)
    snapshots: dict[Stream, str] = {}  # the resourceVersion of each listing under way
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
        activity = hooks.activity
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

    watching.infinite_watch = wrapping(infinite_watch, original_watch)
    watching.watch_objs = wrapping(watch_objs, original_watch_objs)
    fetching.fetch_objs = wrapping(fetch_objs, original_fetch)
