"""The process's HTTP servers as runnables of its manager (:mod:`opsuite_common.runnable`):
/metrics and the probes, served from start to exit, leader or not. Each server is built when it
starts (the metrics certificate is read, or made, only then)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from opsuite_common.health import Check, HealthServer, HttpServer
from opsuite_common.kube import KubeApi
from opsuite_common.metrics_auth import KubeReviewApi, MetricsAuth, server_context
from opsuite_common.metrics_server import metrics_server
from opsuite_common.options import ManagerOptions

log = logging.getLogger(__name__)


class Server:
    """The HTTP server ``build`` makes, served until stopped; started once it listens."""

    needs_leader = False

    def __init__(self, build: Callable[[], HttpServer]) -> None:
        self._build = build
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set."""
        server = self._build()
        try:
            await server.start()
            self.started.set()
            await stop.wait()
        finally:
            await server.stop()


def metrics(options: ManagerOptions, kube: KubeApi) -> Server:
    """The metrics server: plain, or with --metrics-secure HTTPS authenticated and authorized
    through the API server as the operator's own identity (``kube``)."""

    def build() -> HttpServer:
        if not options.metrics_secure:
            return metrics_server(options.metrics_bind_address)
        context = server_context(
            options.metrics_cert_path, options.metrics_cert_name, options.metrics_cert_key
        )
        log.info(
            "metrics served over HTTPS with %s, authenticated and authorized by the API server",
            f"the certificate in {options.metrics_cert_path}"
            if options.metrics_cert_path
            else "a self-signed certificate",
        )
        return metrics_server(
            options.metrics_bind_address,
            ssl_context=context,
            auth=MetricsAuth(KubeReviewApi(kube)),
        )

    return Server(build)


def probes(options: ManagerOptions, liveness: Check, readiness: Check) -> Server:
    """/healthz (``liveness``: the watches are alive) and /readyz (``readiness``)."""

    def build() -> HttpServer:
        health = HealthServer(options.health_probe_bind_address)
        health.add_healthz_check("watches", liveness)
        health.add_readyz_check("leader-or-watches", readiness)
        return health

    return Server(build)
