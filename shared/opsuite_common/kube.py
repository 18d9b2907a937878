"""A small async facade over the ``kubernetes`` client that speaks plain dicts.

Operators read from their watch caches and write through this facade. Responses are parsed
JSON dicts, not the client's model objects: those cost most of a kopf operator's memory
(kopf's docs/critiques), and dicts are what the reconcile functions take anyway. The blocking
client runs in worker threads; every request carries the operator's User-Agent, so the audit
log tells which process did what, and is counted in ``rest_client_requests_total{code,method,host}``
as client-go counts it (the Lease requests of leader election too: they go through the same
client; kopf's own watch and list requests do not, they use kopf's aiohttp session). Every
write passes the leader's :class:`~opsuite_common.fence.WriteFence` right before it leaves.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.connection import HTTPConnection

from opsuite_common.fence import WriteFence
from opsuite_common.metrics import REST_CLIENT_REQUESTS

__all__ = [
    "UNACKNOWLEDGED_TIMEOUT",
    "ApiException",
    "KubeApi",
    "count_requests",
    "gather_results",
    "load_api_client",
    "resource_path",
]

JSON = dict[str, Any]

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


MAX_PARALLEL_REQUESTS = 64
"""Requests in flight at once per operator: threads, and connections kept open for reuse."""
EVENT_WRITERS = 2
"""Event writes in flight at once: client-go's broadcaster writes them one by one from its own
goroutine, so that a burst of Events never delays the writes that do the operator's work."""


UNACKNOWLEDGED_TIMEOUT = 2.0
"""Seconds the bytes sent on a connection to the API server may stay unacknowledged before the
kernel drops the connection and them (TCP_USER_TIMEOUT, #20). Without it a request sent just
before a partition stays in the send queue and is retransmitted, and executed, whenever the
partition heals, long after the write fence closed and a standby took over. It must stay below
lease duration - retry period - renew deadline (3 s with client-go's defaults): the fence closes
at the renew deadline at the latest, and what was in flight then must arrive, or never, before
the lease can expire for anyone else."""


def socket_options() -> list[tuple[int, int, int]]:
    """urllib3's defaults (no Nagle) and the bound on unacknowledged bytes."""
    return [
        *HTTPConnection.default_socket_options,
        (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(UNACKNOWLEDGED_TIMEOUT * 1000)),
    ]


def load_api_client(user_agent: str, *, pool_size: int = MAX_PARALLEL_REQUESTS) -> client.ApiClient:
    """An API client from in-cluster config, else KUBECONFIG / ~/.kube/config; its connections
    carry :func:`socket_options`."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = pool_size
    configuration.socket_options = socket_options()
    api_client = client.ApiClient(configuration)
    api_client.user_agent = user_agent
    return api_client


_COUNTED_POOLS: weakref.WeakSet[object] = weakref.WeakSet()


def count_requests(api_client: client.ApiClient) -> None:
    """Count every HTTP request ``api_client`` sends in rest_client_requests_total (once, however
    often called): the status code, or ``<error>`` when no response came, as client-go does."""
    pool = api_client.rest_client.pool_manager
    if pool in _COUNTED_POOLS:
        return
    send = pool.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        code = "<error>"
        try:
            response = send(method, url, *args, **kwargs)
            code = str(response.status)
            return response
        finally:
            REST_CLIENT_REQUESTS.labels(code, method.upper(), urlsplit(url).netloc).inc()

    pool.request = request  # type: ignore[method-assign]
    _COUNTED_POOLS.add(pool)


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
    """Async REST calls returning dicts; raises ``ApiException`` on an error status, and
    ``WriteFenced`` for a write (any method but GET) while ``fence`` is closed."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        fence: WriteFence,
        request_timeout: float = 30.0,
        max_parallel: int = MAX_PARALLEL_REQUESTS,
    ) -> None:
        self._client = api_client
        self._fence = fence
        self._timeout = request_timeout
        count_requests(api_client)
        # Its own pool: asyncio's default one has min(32, cores + 4) threads (6 on 2 cores),
        # which would cap a burst of pod creates at 6 requests in flight.
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="kube-api")

    def with_parallelism(self, max_parallel: int) -> KubeApi:
        """A KubeApi on the same client (credentials, connections, fence) with its own, smaller
        pool."""
        return KubeApi(
            self._client,
            fence=self._fence,
            request_timeout=self._timeout,
            max_parallel=max_parallel,
        )

    @property
    def api_client(self) -> client.ApiClient:
        """The underlying client (for code that needs the generated API classes)."""
        return self._client

    def request(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> asyncio.Future[JSON]:
        """One API request in a worker thread; a future of the parsed JSON (``{}`` if empty)."""
        call = functools.partial(self._request, method, path, body, query, content_type)
        return asyncio.get_running_loop().run_in_executor(self._pool, call)

    def _request(
        self,
        method: str,
        path: str,
        body: object,
        query: Mapping[str, str] | None,
        content_type: str,
    ) -> JSON:
        # The generated client's request building (param_serialize) walks and copies every
        # body for model objects we never send; only its authentication step is needed.
        client_ = self._client
        headers = {
            **client_.default_headers,
            "Accept": "application/json",
            "Content-Type": content_type,
        }
        client_.update_params_for_auth(headers, None, ["BearerToken"], path, method, body)
        url = client_.configuration.host + path
        if query:
            url += "?" + urlencode(query)
        # The fence is passed here, in the worker thread, as late as possible: a write that was
        # queued for a thread when leadership ended is refused, never sent.
        fence: AbstractContextManager[None] = (
            self._fence.write(f"{method} {path}") if method != "GET" else nullcontext()
        )
        with fence:
            response = client_.call_api(
                method, url, header_params=headers, body=body, _request_timeout=self._timeout
            )
            response.read()  # type: ignore[no-untyped-call]
        raw = response.data or b""
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=raw.decode(), data=None)
        parsed: JSON = json.loads(raw) if raw else {}
        return parsed

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
