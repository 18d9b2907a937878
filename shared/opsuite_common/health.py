"""Health probes (/healthz, /readyz) in the style of controller-runtime.

Servers run in their own thread with their own event loop, so a wedged
operator loop cannot stall probes: /healthz still answers and its built-in
``eventloop`` check reports the wedge. Checks are therefore called from that
thread and must be quick and thread-safe (reading timestamps and flags is).
"""

import asyncio
import concurrent.futures
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web

Middleware = Callable[..., Awaitable[web.StreamResponse]]
"""An aiohttp middleware (``web.middleware``-decorated)."""
Check = Callable[[], str | None]
"""A check returns None when healthy; an error string or an exception means failing."""


def parse_bind_address(bind: str) -> tuple[str | None, int] | None:
    """Parse ":8081", "127.0.0.1:8081", "[::1]:8081"; "0" or "" mean disabled (None).

    An empty host binds every interface (dual-stack), like Go's net.Listen.
    """
    if bind in ("", "0"):
        return None
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"invalid bind address {bind!r}: want [host]:port or 0")
    return host.removeprefix("[").removesuffix("]") or None, int(port)


@dataclass(frozen=True)
class _Serving:
    port: int
    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    thread: threading.Thread


class HttpServer:
    """An aiohttp app served from a dedicated thread on a bind address."""

    def __init__(
        self,
        bind: str,
        routes: Sequence[web.RouteDef],
        name: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        middlewares: Iterable[Middleware] = (),
    ) -> None:
        """Serve ``routes`` on ``bind`` (see parse_bind_address) once started, over TLS with
        ``ssl_context``, each request through ``middlewares``."""
        self._address = parse_bind_address(bind)
        self._routes = routes
        self._name = name
        self._ssl_context = ssl_context
        self._middlewares = tuple(middlewares)
        self._serving: _Serving | None = None

    @property
    def port(self) -> int | None:
        """The bound port while serving."""
        return None if self._serving is None else self._serving.port

    async def start(self) -> int | None:
        """Start serving; return the bound port, or None when disabled."""
        if self._address is not None and self._serving is None:
            ready: concurrent.futures.Future[_Serving] = concurrent.futures.Future()
            threading.Thread(
                name=self._name, daemon=True, target=asyncio.run, args=(self._serve(ready),)
            ).start()
            self._serving = await asyncio.wrap_future(ready)
        return self.port

    async def stop(self) -> None:
        """Stop serving and wait for the server thread to finish."""
        serving, self._serving = self._serving, None
        if serving is not None:
            serving.loop.call_soon_threadsafe(serving.stop.set)
            await asyncio.to_thread(serving.thread.join)

    async def _serve(self, ready: concurrent.futures.Future[_Serving]) -> None:
        assert self._address is not None
        app = web.Application(middlewares=self._middlewares)
        app.add_routes(self._routes)
        runner = web.AppRunner(app, access_log=None)
        host, port = self._address
        try:
            await runner.setup()
            site = (
                web.TCPSite(runner, host, port, ssl_context=self._ssl_context)
                if host is not None
                else web.SockSite(runner, _listen_everywhere(port), ssl_context=self._ssl_context)
            )
            await site.start()
        except BaseException as exc:
            await runner.cleanup()
            ready.set_exception(exc)
            return
        stop = asyncio.Event()
        port = runner.addresses[0][1]
        ready.set_result(
            _Serving(port, asyncio.get_running_loop(), stop, threading.current_thread())
        )
        try:
            await stop.wait()
        finally:
            await runner.cleanup()


def _listen_everywhere(port: int) -> socket.socket:
    """One socket on every interface, dual-stack when possible: one port even for port 0."""
    if socket.has_dualstack_ipv6():
        return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
    return socket.create_server(("0.0.0.0", port))


def run_check(check: Check) -> str | None:
    """Run one check: None when healthy, else the reason."""
    try:
        result = check()
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return None if result is None else result or "failed"


def _endpoint(
    kind: str, checks: dict[str, Check]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        # sorted() copies the items in one step under the GIL: safe against add_*_check.
        results = [(name, run_check(check)) for name, check in sorted(checks.items())]
        failed = any(reason is not None for _, reason in results)
        if not failed and "verbose" not in request.query:
            return web.Response(text="ok")
        lines = [
            f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}"
            for name, reason in results
        ]
        lines.append(f"{kind} check {'failed' if failed else 'passed'}")
        return web.Response(status=500 if failed else 200, text="\n".join(lines) + "\n")

    return handle


class EventLoopMonitor:
    """Liveness check: fails when the loop that started it stops ticking."""

    def __init__(self, max_lag: float, clock: Callable[[], float] = time.monotonic) -> None:
        """Tick every ``max_lag / 4`` seconds; fail once no tick for ``max_lag``."""
        self._max_lag = max_lag
        self._clock = clock
        self._last_tick = clock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start ticking on the running loop."""
        if self._task is None:
            self._last_tick = self._clock()
            self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        """Stop ticking."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait((task,))

    def __call__(self) -> str | None:
        """The check."""
        if self._task is None:
            return "not started"
        silent = self._clock() - self._last_tick
        if silent > self._max_lag:
            return f"event loop unresponsive for {silent:.1f}s (limit {self._max_lag:g}s)"
        return None

    async def _tick(self) -> None:
        while True:
            self._last_tick = self._clock()
            await asyncio.sleep(self._max_lag / 4)


class WatchFreshness:
    """Readiness check: every registered watch must show activity within its timeout."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Measure staleness with ``clock`` (seconds, monotonic)."""
        self._clock = clock
        self._timeouts: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def register(self, name: str, timeout: float) -> None:
        """Track ``name``; it counts as fresh now, so it has ``timeout`` to show activity."""
        self._last[name] = self._clock()
        self._timeouts[name] = timeout  # last, so the probe thread never sees it without _last

    def mark(self, name: str) -> None:
        """Record activity (an event, bookmark or reconnect) on watch ``name``."""
        if name not in self._timeouts:
            raise KeyError(f"watch {name!r} is not registered")
        self._last[name] = self._clock()

    def __call__(self) -> str | None:
        """The check: names each stale watch, or None when all are fresh."""
        now = self._clock()
        stale = [
            f"watch {name} idle for {now - self._last[name]:.0f}s (timeout {timeout:g}s)"
            for name, timeout in sorted(self._timeouts.copy().items())
            if now - self._last[name] > timeout
        ]
        return "; ".join(stale) or None


class HealthServer(HttpServer):
    """/healthz and /readyz with named checks, Kubernetes ``?verbose`` output.

    Unless ``max_loop_lag`` is None, /healthz includes an ``eventloop`` check
    on the loop that calls start().
    """

    def __init__(self, bind: str = ":8081", *, max_loop_lag: float | None = 10.0) -> None:
        """Serve probes on ``bind`` (controller-runtime's --health-probe-bind-address)."""
        self._healthz: dict[str, Check] = {}
        self._readyz: dict[str, Check] = {}
        super().__init__(
            bind,
            [
                web.get("/healthz", _endpoint("healthz", self._healthz)),
                web.get("/readyz", _endpoint("readyz", self._readyz)),
            ],
            name="health-probes",
        )
        self._monitor = None if max_loop_lag is None else EventLoopMonitor(max_loop_lag)
        if self._monitor is not None:
            self.add_healthz_check("eventloop", self._monitor)

    def add_healthz_check(self, name: str, check: Check) -> None:
        """Add a liveness check."""
        self._healthz[name] = check

    def add_readyz_check(self, name: str, check: Check) -> None:
        """Add a readiness check."""
        self._readyz[name] = check

    async def start(self) -> int | None:
        """Start the event loop monitor and the server; return the bound port."""
        if self._monitor is not None:
            self._monitor.start()
        return await super().start()

    async def stop(self) -> None:
        """Stop the server and the event loop monitor."""
        await super().stop()
        if self._monitor is not None:
            await self._monitor.stop()
