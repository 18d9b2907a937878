"""Local HTTP servers standing in for the API server: an aiohttp application served on a free
port of 127.0.0.1, and for kopf, its credentials pointed at one; and the kopf functions opsuite
installs its own over (:func:`opsuite_common.kopfwatch.install`), which a test puts back, with
the hooks a test installs them with when it runs no manager."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from kopf._cogs.clients import api, auth, errors, fetching, watching
from kopf._cogs.structs import credentials
from kopf._core.reactor import queueing

from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.kopfwatch.hooks import Deliver
from opsuite_common.kopfwatch.shape import unwrapped
from opsuite_common.protowatch import Decoder

PATCHED = (
    (watching, "infinite_watch"),
    (watching, "watch_objs"),
    (api, "stream"),
    (errors, "check_response"),
    (fetching, "fetch_objs"),
    (queueing, "watcher"),
)
"""Each kopf module and the name in it that opsuite replaces."""


def kopf_unpatched(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's own functions for the rest of the test, whatever other tests of the session
    installed over them; what was there is put back after it."""
    for module, name in PATCHED:
        function = getattr(module, name)
        monkeypatch.setattr(module, name, unwrapped(function))


@dataclass
class Hooks:
    """The hooks of :func:`opsuite_common.kopfwatch.install` for a test without a manager:
    ``activity``, and what ``decoder`` and ``route`` answer (by default: JSON, kopf's own
    handling)."""

    activity: WatchActivity = field(default_factory=WatchActivity)
    decoders: Callable[[str], Decoder | None] = lambda _url: None
    routes: Callable[[str, str], Deliver | None] = lambda _group, _plural: None

    def decoder(self, url: str) -> Decoder | None:
        """The decoder of a watch URL."""
        return self.decoders(url)

    def route(self, group: str, plural: str) -> Deliver | None:
        """The handler of a resource's events."""
        return self.routes(group, plural)


async def serve(
    app: web.Application,
    *,
    ssl_context: ssl.SSLContext | None = None,
    shutdown_timeout: float = 60.0,
) -> web.AppRunner:
    """Serve ``app`` on a free port of 127.0.0.1 (:func:`address`); clean the runner up after."""
    runner = web.AppRunner(app, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
    return runner


def address(runner: web.AppRunner) -> str:
    """``127.0.0.1:<port>`` of a runner :func:`serve` started."""
    return f"127.0.0.1:{runner.addresses[0][1]}"


async def serve_for_kopf(
    app: web.Application, *, shutdown_timeout: float = 60.0
) -> tuple[web.AppRunner, credentials.Vault]:
    """:func:`serve` ``app`` and point kopf's credentials at it; returns the runner and the
    credentials' vault, to close."""
    runner = await serve(app, shutdown_timeout=shutdown_timeout)
    vault = credentials.Vault()
    server = f"http://{address(runner)}"
    await vault.populate({"test": credentials.ConnectionInfo(server=server)})
    auth.vault_var.set(vault)
    return runner, vault
