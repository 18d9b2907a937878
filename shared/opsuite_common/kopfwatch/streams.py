"""kopf's watch requests read as opsuite reads them (see :func:`install_streams`): JSON lines
parsed by orjson from their bytes, protobuf frames decoded, a clean end of a watch a sign of
life."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import kopf
import orjson
from kopf._cogs.clients import api, errors

from opsuite_common.kopfwatch.activity import Stream, watched_stream
from opsuite_common.kopfwatch.frames import Answered, frames
from opsuite_common.kopfwatch.hooks import WatchHooks
from opsuite_common.kopfwatch.shape import unwrapped, wrapping
from opsuite_common.protofields import ProtobufError
from opsuite_common.protowatch import ACCEPT, CONTENT_TYPE


def install_streams(hooks: WatchHooks) -> None:
    """Put opsuite's ``api.stream`` in kopf's place, and wrap ``errors.check_response``.

    ``api.stream`` is kopf's rewritten to parse each line with orjson from its bytes, where
    kopf decodes the line to text for the standard library's parser, which was a large part of
    an operator's CPU until Ready with many pods present. A watch that ``hooks.decoder`` has a
    decoder for asks for protobuf, else JSON (:mod:`opsuite_common.protowatch`), and reads
    length-prefixed frames unless the API server answers JSON; a frame that fails to decode
    ends the stream, and kopf resumes it (or lists again) in JSON, which that stream keeps to
    from then on; ``errors.check_response`` is wrapped to read an error answered in protobuf.
    A watch request that the API server ends cleanly (``api.stream`` is used only for
    watches, running out without an error) marks the watch alive in ``hooks.activity``: that
    happens every ``server_timeout`` on a healthy connection even when nothing changes and no
    bookmark comes; a hung API server or a half-open connection shows neither. kopf looks
    these functions up by module attribute at call time (private API: kopf is pinned to
    1.45.x; shared/tests/test_protowatch.py reads watches against a local server).
    """

    original_stream = unwrapped(api.stream)
    original_check = unwrapped(errors.check_response)
    in_json: set[Stream] = set()  # streams whose protobuf failed to decode

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

    api.stream = wrapping(stream, original_stream)
    errors.check_response = wrapping(check_response, original_check)
    logging.getLogger(__name__).debug("watch streams installed")
