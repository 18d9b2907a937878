"""The /metrics endpoint: :data:`opsuite_common.metrics.REGISTRY` served as
controller-runtime's metrics server does, over plain HTTP, or over HTTPS with each request
authenticated and authorized (:mod:`opsuite_common.metrics_auth`)."""

from __future__ import annotations

import ssl

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from opsuite_common.health import HttpServer
from opsuite_common.metrics import REGISTRY
from opsuite_common.metrics_auth import MetricsAuth


def metrics_server(
    bind: str = ":8080",
    registry: CollectorRegistry = REGISTRY,
    *,
    ssl_context: ssl.SSLContext | None = None,
    auth: MetricsAuth | None = None,
) -> HttpServer:
    """The server of ``registry`` at /metrics on ``bind`` ("0" disables), to ``.start()``
    (then ``.port`` is the bound port) and ``.stop()``.

    Like controller-runtime's --metrics-bind-address; with ``ssl_context`` over HTTPS, and with
    ``auth`` each request authenticated and authorized (--metrics-secure).
    """

    async def handle(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    return HttpServer(
        bind,
        [web.get("/metrics", handle)],
        name="metrics",
        ssl_context=ssl_context,
        middlewares=() if auth is None else (auth.middleware(),),
    )
