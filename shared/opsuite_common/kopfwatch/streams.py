"""kopf's watch streams, wrapped (see :func:`track_watch_activity`): listings and signs of life
reported, streaming lists, protobuf, failed attempts waited out as client-go's reflector does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, cast

import aiohttp
import kopf
import orjson
from kopf._cogs.clients import api, errors, fetching, watching

from opsuite_common.kopfwatch.activity import (
    Stream,
    WatchBackoff,
    described,
    watched_stream,
)
from opsuite_common.kopfwatch.frames import Answered, frames
from opsuite_common.kopfwatch.hooks import WatchHooks
from opsuite_common.protofields import ProtobufError
from opsuite_common.protowatch import ACCEPT, CONTENT_TYPE


class InitialEventsIncomplete(Exception):
    """A streaming list ended, or was refused, before its initial events were all sent."""


def track_watch_activity(hooks: WatchHooks, backoff: WatchBackoff | None = None) -> None:
    """Wrap kopf's watch streams to report listings and signs of life to ``hooks.activity``,
    watch in protobuf where ``hooks.decoder`` has a decoder for the URL, and wait out failed
    attempts (``backoff``, client-go's reflector backoff by default) instead of ending the
    watch.

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
        decoder = None if watched_stream(url) in in_json else hooks.decoder(url)
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
                    async for frame in frames(response.content):
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
            hooks.activity.mark(*watched_stream(url))

    async def check_response(response: aiohttp.ClientResponse) -> None:
        """kopf's check of an answer, also for an error answered in protobuf (the Status of
        a refused watch that asked for it), which kopf would read as text and fail on: the
        same error is raised as for its JSON form."""
        decoder = None
        if response.status >= 400 and response.content_type == CONTENT_TYPE:
            decoder = hooks.decoder(str(response.url))
        if decoder is None:
            await original_check(response)
            return
        answered = Answered(response, decoder.status(await response.read()))
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
