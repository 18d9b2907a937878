"""The operators' one HTTP stack to the API server: a facade over one pool of keep-alive
connections (:mod:`opsuite_common.http1`) that speaks plain dicts (#21, item 3; #19;
docs/http-stack.md has the measurements that chose it).

Operators read from their watch caches and write through :class:`KubeApi`; leader election's
Lease requests and the metrics endpoint's TokenReviews and SubjectAccessReviews go through it
too, on the same connections (kopf's watches and lists use kopf's own aiohttp session).
Everything runs on the event loop: no thread (but an exec credential plugin's). Responses are
parsed JSON dicts, as the reconcile functions take them, not a generated client's model
objects. The configuration (in-cluster service account, else KUBECONFIG) comes from
:mod:`opsuite_common.kubeconfig`, and the ``Authorization`` header is asked of it for every
request, so a rotated service account token is read again when it is due. Every request
carries the operator's User-Agent, so the audit log tells which process did what, and is
counted in ``rest_client_requests_total{code,method,host}`` as client-go counts it. Every write
passes the leader's :class:`~opsuite_common.fence.WriteFence` right before it leaves, once it
has its turn among the requests in flight and its credentials. HTTP/1.1 takes a connection per
request in flight, each with its own TLS handshake: new connections resume the TLS session of
an earlier one (:class:`~opsuite_common.kube_transport.ResumingContext`), and the first request
of the process goes alone so that a burst's connections find its session there.

A request the API server answers 429, or 5xx, with a Retry-After in seconds is sent again after
that long (at most MAX_RETRY_AFTER, plus a random part: RETRY_JITTER), up to MAX_RETRIES times,
whatever its method: what client-go's rest client does (``checkWait``). API Priority and
Fairness, the max-in-flight filter and a shutting-down API server reject a request so, before
carrying it out; the caller sees the error only when the retries are spent. Each attempt is
counted with its code, takes its turn among the requests in flight and passes the write fence
again.

Length: one job, the one way a request reaches the API server (its turn, credentials, the fence,
counting, the retries asked for); the connections under it are
:mod:`opsuite_common.kube_transport`'s.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import orjson

from opsuite_common.fence import WriteFence
from opsuite_common.http1_connection import Response
from opsuite_common.kube_transport import Session
from opsuite_common.kubeconfig import Configuration
from opsuite_common.metrics import REST_CLIENT_REQUESTS
from opsuite_common.store import JSON

__all__ = [
    "MAX_RETRIES",
    "MAX_RETRY_AFTER",
    "RETRY_JITTER",
    "ApiException",
    "KubeApi",
    "gather_results",
    "resource_path",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


MAX_PARALLEL_REQUESTS = 64
"""Requests of the operator's work in flight at once, each on its own connection."""
EVENT_WRITERS = 2
"""Event writes in flight at once: client-go's broadcaster writes them one by one from its own
goroutine, so that a burst of Events never delays the writes that do the operator's work."""
MAX_RETRIES = 10
"""Times a request is sent again when the API server asks for it (client-go's maxRetries)."""
MAX_RETRY_AFTER = 10.0
"""Seconds waited at most before sending a request again, whatever its Retry-After asks
(client-go waits whatever it asks): the API server's throttling asks for a second or so; a far
longer ask would hold a reconcile, ten times over, where the work queue's backoff serves."""
RETRY_JITTER = 1.0
"""A retry waits its Retry-After plus up to this fraction of it more, at random: the throttling
answers a burst's requests at once with the same Retry-After, and sent again all together they
would meet the same full priority level (client-go's client-side rate limiter spreads them)."""


class ApiException(Exception):
    """The API server answered an error status; ``body`` is its answer (a Status, mostly)."""

    def __init__(
        self, status: int, reason: str = "", body: str = "", retry_after: int | None = None
    ) -> None:
        super().__init__(f"({status}) {reason}: {body[:300]}")
        self.status = status
        self.reason = reason
        self.body = body
        self.retry_after = retry_after
        """The answer's Retry-After in seconds (None: it had none)."""

    @classmethod
    def of(cls, response: Response) -> ApiException:
        """The error of an answer with an error status."""
        body = response.body.decode(errors="replace")
        return cls(response.status, response.reason, body, response.retry_after)

    def retry_wait(self) -> float | None:
        """Seconds to wait before sending the request again, or None not to, as client-go's
        ``checkWait`` decides: only a 429 or a 5xx with a Retry-After, whatever the method (a
        write answered 500 without one may have been carried out)."""
        if self.retry_after is None or not (self.status == 429 or self.status >= 500):
            return None
        return min(self.retry_after, MAX_RETRY_AFTER)


async def gather_results(futures: Sequence[asyncio.Future[JSON]]) -> list[JSON | ApiException]:
    """Wait for concurrent requests; API errors are returned in place, anything else (a bug, a
    dropped connection) is raised."""
    if not futures:
        return []
    results: list[JSON | ApiException] = []
    for result in await asyncio.gather(*futures, return_exceptions=True):
        if isinstance(result, BaseException) and not isinstance(result, ApiException):
            raise result
        results.append(result)
    return results


def _encode(body: object) -> bytes | None:
    """A request body as bytes: JSON for anything but text or bytes."""
    if body is None or isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return orjson.dumps(body)


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection, an object or one of its subresources."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = prefix + (f"/namespaces/{quote(namespace)}" if namespace else "") + f"/{plural}"
    if name is not None:
        path += f"/{quote(name)}"
        if subresource is not None:
            path += f"/{subresource}"
    return path


class KubeApi:
    """Async REST calls returning dicts; raises ``ApiException`` on an error status (once the
    retries the API server asked for are spent), and ``WriteFenced`` for a write (any method
    but GET) while ``fence`` is closed.

    At most ``max_parallel`` requests are in flight; the others wait for their turn, and a
    write passes the fence only when its turn comes, right before it is sent: a write that was
    waiting when leadership ended is refused, never sent. A request, once made, runs to its
    end even if its caller stops waiting (is cancelled), as a request handed to a thread did:
    a write stays counted in the fence's flight until its answer comes.
    """

    def __init__(
        self,
        configuration: Configuration,
        *,
        user_agent: str,
        fence: WriteFence | None,
        request_timeout: float = 30.0,
        max_parallel: int = MAX_PARALLEL_REQUESTS,
    ) -> None:
        """Requests to ``configuration``'s API server; ``fence=None`` lets writes through
        always (only for :meth:`unfenced`'s purposes)."""
        self._session = Session(configuration, user_agent)
        self._fence = fence
        self._timeout = request_timeout
        self._slots = asyncio.Semaphore(max_parallel)
        self._requests: set[asyncio.Task[None]] = set()

    def _derive(
        self, fence: WriteFence | None, timeout: float | None, max_parallel: int
    ) -> KubeApi:
        derived = copy.copy(self)  # the same session
        derived._fence = fence
        if timeout is not None:
            derived._timeout = timeout
        derived._slots = asyncio.Semaphore(max_parallel)
        derived._requests = set()
        return derived

    def with_parallelism(self, max_parallel: int) -> KubeApi:
        """A KubeApi on the same session (credentials, connections) and fence, with its own
        bound on requests in flight."""
        return self._derive(self._fence, None, max_parallel)

    def unfenced(self, max_parallel: int, *, request_timeout: float | None = None) -> KubeApi:
        """A KubeApi on the same session whose writes pass whether this process leads or not,
        for the requests that are not the operator's work: the Lease (taken while the fence
        is closed, released after it closed) and the metrics endpoint's reviews (a standby
        serves /metrics too)."""
        return self._derive(None, request_timeout, max_parallel)

    @property
    def configuration(self) -> Configuration:
        """The API server and credentials (kopf logs in with the same)."""
        return self._session.configuration

    async def close(self) -> None:
        """Close the connections (shared with the KubeApis derived from this one)."""
        self._session.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> asyncio.Future[JSON]:
        """Make one API request now; a future of the parsed JSON (``{}`` if empty).

        The request runs in a task of its own to its end, whether or not the future is still
        awaited (cancelling the future leaves it running). Its outcome, an error included, goes
        to the future only: the task itself always ends cleanly, since kopf re-raises at
        shutdown the error of any task that ended during it (a 422 answered while SIGTERM was
        being handled made the operator exit 1)."""
        outcome: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                answer = await self._retrying(
                    f"{method} {path}",
                    lambda: self._send(method, path, body, query, content_type),
                    outcome,
                )
            except Exception as exc:  # handed to the future
                if not outcome.done():
                    outcome.set_exception(exc)
                return
            if not outcome.done():
                outcome.set_result(answer)

        task = asyncio.ensure_future(run())
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)
        return outcome

    async def _send(
        self,
        method: str,
        path: str,
        body: object,
        query: Mapping[str, str] | None,
        content_type: str,
    ) -> JSON:
        data = _encode(body)
        async with self._slots, self._session.turn():
            response = await self._exchange(method, path, query, data, content_type, self._timeout)
        if not 200 <= response.status <= 299:
            raise ApiException.of(response)
        parsed: JSON = orjson.loads(response.body) if response.body else {}
        return parsed

    async def _exchange(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        data: bytes | None,
        content_type: str,
        limit: float,
        *,
        first_line: bool = False,
    ) -> Response:
        """One request on the session's connections, ``limit`` seconds at most, counted in
        rest_client_requests_total: the status code, or ``<error>`` when no response came, as
        client-go does. A write passes the fence last, once its credentials are there (an exec
        plugin can take seconds to give them, during which the fence may close)."""
        session = self._session
        pool = session.pool()
        target = pool.target(path + ("?" + urlencode(query, quote_via=quote) if query else ""))
        head = f"{method} {target} HTTP/1.1\r\n".encode() + session.headers
        # Asked for every request: a rotated token is read again when it is due.
        authorization = await session.configuration.authorization()
        if authorization:
            head += f"Authorization: {authorization}\r\n".encode("latin-1")
        if data is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n".encode()
        fence: AbstractContextManager[None] = (
            self._fence.write(f"{method} {path}")
            if self._fence is not None and method != "GET"
            else nullcontext()
        )
        with fence:
            code = "<error>"
            try:
                async with asyncio.timeout(limit):
                    response = await pool.request(
                        method, head + b"\r\n", data, first_line=first_line
                    )
                code = str(response.status)
                return response
            finally:
                REST_CLIENT_REQUESTS.labels(code, method, session.host).inc()

    async def _retrying(
        self, what: str, attempt: Callable[[], Awaitable[T]], caller: asyncio.Future[Any] | None
    ) -> T:
        """``attempt()``, made again while it fails with an ApiException whose
        :meth:`~ApiException.retry_wait` says when, MAX_RETRIES times at most; not once
        ``caller`` is done: nobody waits for the answer any more (a Lease renewal the elector
        gave up on is not sent later). Each retry is logged, and the end of the retries."""
        for retry in itertools.count(1):
            try:
                return await attempt()
            except ApiException as exc:
                wait = exc.retry_wait()
                if wait is None:
                    raise
                wait += random.uniform(0, wait * RETRY_JITTER)
                if retry > MAX_RETRIES:
                    log.warning("%s: %d after %d retries: %s", what, exc.status, MAX_RETRIES, exc)
                    raise
                log.debug(
                    "%s: %d, retry %d of %d in %g s", what, exc.status, retry, MAX_RETRIES, wait
                )
                if caller is None:
                    await asyncio.sleep(wait)
                else:
                    await asyncio.wait((caller,), timeout=wait)
                    if caller.done():
                        raise
        raise AssertionError("unreachable")

    async def wait_for_event(self, path: str, query: Mapping[str, str], max_wait: float) -> None:
        """Watch ``path`` (``query`` without ``watch``) and return at its first event, or when
        the server ends the watch; raise ApiException on an error status, once the retries
        the API server asked for are spent. Cancelling the wait ends the watch."""
        await self._retrying(
            f"WATCH {path}", lambda: self._wait_for_event(path, query, max_wait), None
        )

    async def _wait_for_event(self, path: str, query: Mapping[str, str], max_wait: float) -> None:
        """One watch request for :meth:`wait_for_event`; its connection is closed after, never
        reused."""
        watch = {**query, "watch": "true"}
        async with self._slots:
            response = await self._exchange(
                "GET", path, watch, None, "", max_wait + 5, first_line=True
            )
        if response.status != 200:
            raise ApiException.of(response)

    async def get(self, path: str) -> JSON | None:
        """GET an object; None when it does not exist."""
        try:
            return await self.request("GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, path: str, *, label_selector: str | None = None) -> list[JSON]:
        """LIST a collection (all pages)."""
        items: list[JSON] = []
        query: dict[str, str] = {"limit": "500"}
        if label_selector:
            query["labelSelector"] = label_selector
        while True:
            page = await self.request("GET", path, query=query)
            items.extend(page.get("items", []))
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items
            query["continue"] = token

    def create(self, path: str, body: Mapping[str, Any]) -> asyncio.Future[JSON]:
        """POST a new object to a collection path."""
        return self.request("POST", path, body=body)

    def patch(self, path: str, patch: object, *, patch_type: str = "merge") -> asyncio.Future[JSON]:
        """PATCH an object (``merge``, ``strategic``, ``json`` or ``apply``)."""
        return self.request("PATCH", path, body=patch, content_type=PATCH_TYPES[patch_type])

    def delete(
        self,
        path: str,
        *,
        preconditions: Mapping[str, str] | None = None,
        propagation_policy: str | None = None,
    ) -> asyncio.Future[JSON]:
        """DELETE an object (raises ApiException 404 when it is already gone)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        return self.request("DELETE", path, body=options)
