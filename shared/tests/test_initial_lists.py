"""Initial lists and failed watch attempts through kopf's own watch code, as patched by
opsuite, against a real local HTTP server that speaks the API server's list and watch protocol
(no mocked client)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import pytest
from aiohttp import web
from kopf._cogs.clients import api, watching
from kopf._cogs.structs import credentials, references
from kopf._core.reactor import queueing

from opsuite_common import kopfwatch
from opsuite_common.kopfwatch.activity import WatchActivity, WatchBackoff
from opsuite_common.kopfwatch.settings import LIST_CHUNK_SIZE, configure_kopf
from opsuite_common.manager import Manager
from opsuite_common.options import parse_options
from opsuite_common.store import JSON, Store, object_key
from opsuite_testkit import FakeClock, offline_manager
from opsuite_testkit.local_server import Hooks, kopf_unpatched, serve_for_kopf

PODS = references.Resource(group="", version="v1", plural="pods", namespaced=True)
PATH = "/api/v1/namespaces/ns/pods"
END = {"k8s.io/initial-events-end": "true"}


@dataclass
class ApiServer:
    """Pods by name (their resourceVersion), and how it answers the first requests."""

    pods: dict[str, str]
    answers: list[int | tuple[int, str] | list[bytes]] = field(default_factory=list)
    """How the first requests (watches or pages of LIST) are answered, in order: an HTTP status
    (with a Status), a status and its Retry-After, or the lines of a watch that the server then
    ends. Later ones: a streaming list sends every pod and the bookmark that ends them, a page
    of LIST holds ``pods``, a resumed watch sends nothing."""
    queries: list[dict[str, str]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        async def pods(request: web.Request) -> web.StreamResponse:
            query = dict(request.query)
            self.queries.append(query)
            self.arrivals.append(asyncio.get_running_loop().time())
            response = web.StreamResponse()
            if self.answers:
                answer = self.answers.pop(0)
                if not isinstance(answer, list):
                    code, retry_after = answer if isinstance(answer, tuple) else (answer, None)
                    status = {"kind": "Status", "code": code, "message": f"answered {code}"}
                    headers = {} if retry_after is None else {"Retry-After": retry_after}
                    return web.json_response(status, status=code, headers=headers)
                await response.prepare(request)
                for line in answer:
                    await response.write(line)
                return response
            if query.get("watch") != "true":
                return self._list(query)
            if query.get("sendInitialEvents") != "true":
                await self.closing.wait()  # a resumed watch: nothing happens
            await response.prepare(request)
            for name, rv in list(self.pods.items()):
                await response.write(_line("ADDED", name, rv))
            await response.write(_line("BOOKMARK", "", "100", END))
            await self.closing.wait()
            return response

        app = web.Application()
        app.router.add_get(PATH, pods)
        return app

    def _list(self, query: dict[str, str]) -> web.Response:
        items = [
            {"metadata": {"namespace": "ns", "name": n, "resourceVersion": rv}}
            for n, rv in self.pods.items()
        ]
        limit = int(query["limit"])
        start = int(query.get("continue") or 0)
        more = start + limit < len(items)
        meta = {"resourceVersion": "100", "continue": str(start + limit) if more else ""}
        page = items[start : start + limit]
        return web.json_response({"kind": "PodList", "metadata": meta, "items": page})


def _line(kind: str, name: str, rv: str, annotations: dict[str, str] | None = None) -> bytes:
    """A watch event of pod ``name`` in "ns" at ``rv``, as the API server sends it."""
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "resourceVersion": rv}
    if annotations:
        meta["annotations"] = annotations
    return json.dumps({"type": kind, "object": {"metadata": meta}}).encode() + b"\n"


@pytest.fixture(autouse=True)
def _kopf_unpatched(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's own functions, put back as they were after the test."""
    kopf_unpatched(monkeypatch)


@pytest.fixture
async def listing() -> AsyncIterator[Any]:
    """``run(server, manager)``: kopf's watch of pods in "ns" against ``server`` until its
    first listing ended, its events delivered to ``manager``'s route of pods (if given, as
    the routed watcher does); returns what it yielded, the listings reported and the
    settings."""
    runners: list[tuple[web.AppRunner, ApiServer]] = []

    async def run(
        server: ApiServer,
        error_backoffs: tuple[float, ...] | None = None,
        manager: Manager | None = None,
    ) -> tuple[list[Any], list[set[tuple[str, str]]], Any]:
        runner, vault = await serve_for_kopf(server.app())
        runners.append((runner, server))
        settings = kopf.OperatorSettings()
        configure_kopf(settings, parse_options("op", "", [], environ={}))
        if error_backoffs is not None:
            settings.networking.error_backoffs = error_backoffs
        activity = WatchActivity() if manager is None else manager.activity
        deliver = None if manager is None else manager.route("", "pods")
        listed: list[set[tuple[str, str]]] = []
        activity.on_listed(lambda _r, _ns, keys, _rv: listed.append(keys))
        kopfwatch.install(Hooks(activity))
        seen: list[Any] = []
        stream: Any = watching.infinite_watch(
            settings=settings, resource=PODS, namespace=references.NamespaceName("ns")
        )
        async with contextlib.aclosing(stream):
            async with asyncio.timeout(10):
                async for item in stream:
                    seen.append(item)
                    if item is watching.Bookmark.LISTED:
                        break
                    if deliver is not None and item.get("type") != "BOOKMARK":
                        deliver(item)
        await vault.close()
        return seen, listed, settings

    yield run
    for runner, server in runners:
        server.closing.set()
        await runner.cleanup()


def _names(seen: list[Any]) -> list[str | None]:
    return [
        i["object"]["metadata"]["name"] if isinstance(i, dict) else None
        for i in seen
        if i is watching.Bookmark.LISTED or i.get("type") is None
    ]


async def test_an_initial_list_is_one_stream_of_events_from_the_watch_cache(listing: Any) -> None:
    """As client-go's reflector lists (WatchList): no LIST request, every object an event of
    the watch, the bookmark that ends them ending the listing."""
    server = ApiServer({"a": "5", "b": "7"})
    seen, listed, settings = await listing(server)
    assert _names(seen) == ["a", "b", None]
    assert listed == [{("ns", "a"), ("ns", "b")}]
    assert len(server.queries) == 1
    query = server.queries[0]
    assert query["watch"] == "true"
    assert query["sendInitialEvents"] == "true"
    assert query["resourceVersionMatch"] == "NotOlderThan"
    assert "resourceVersion" not in query
    assert settings.watching.initial_streaming


async def test_a_streaming_list_cut_short_is_listed_again_in_pages(listing: Any) -> None:
    """A stream that ends before its bookmark is not resumed (kopf would resume it from the
    last object's resourceVersion, which orders nothing among initial events): the objects
    are listed again, in pages, and the listing holds only what this second list returned
    (an object deleted in between is not kept)."""
    server = ApiServer(
        {"a": "5", "c": "9"}, answers=[[_line("ADDED", "a", "5"), _line("ADDED", "b", "7")]]
    )
    seen, listed, settings = await listing(server)
    assert listed == [{("ns", "a"), ("ns", "c")}]
    assert _names(seen)[-3:] == ["a", "c", None]
    assert [q.get("sendInitialEvents") for q in server.queries] == ["true", None]
    assert server.queries[1]["limit"] == str(LIST_CHUNK_SIZE)
    assert not settings.watching.initial_streaming


async def test_an_api_server_refusing_streaming_lists_is_listed_in_pages(listing: Any) -> None:
    """WatchList disabled on the API server (422): the operator lists in pages instead of
    losing the watch."""
    server = ApiServer({"a": "5"}, answers=[422])
    seen, listed, settings = await listing(server)
    assert _names(seen) == ["a", None]
    assert listed == [{("ns", "a")}]
    assert server.queries[1]["limit"] == str(LIST_CHUNK_SIZE)
    assert not settings.watching.initial_streaming


async def test_a_throttled_watch_is_sent_again_when_the_retry_after_says(listing: Any) -> None:
    """kopf sends a watch (or list) the API server answered 429 again, as client-go's rest
    client does: after the Retry-After, not after kopf's own backoff when that is longer
    (here a minute), and the streaming list goes on as one (no switch to pages)."""
    server = ApiServer({"a": "5"}, answers=[(429, "1")])
    _seen, listed, settings = await listing(server, error_backoffs=(60,))
    assert listed == [{("ns", "a")}]
    assert [q.get("sendInitialEvents") for q in server.queries] == ["true", "true"]
    assert server.arrivals[1] - server.arrivals[0] >= 1.0
    assert settings.watching.initial_streaming


TOO_LARGE = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "code": 504,
    "reason": "Timeout",
    "message": "Too large resource version",
    "details": {"retryAfterSeconds": 1},
}
"""What the API server sends, in a watch's 200 stream, when its watch cache cannot catch up
with the consistent read a streaming list asks for within 3 s."""
ERROR_LINE = json.dumps({"type": "ERROR", "object": TOO_LARGE}).encode() + b"\n"


@dataclass
class Watcher:
    """kopf's watcher of pods in "ns" (as opsuite routes it), running against a server."""

    server: ApiServer
    settings: kopf.OperatorSettings
    task: asyncio.Task[None]
    delivered: asyncio.Queue[Mapping[str, Any]]
    listed: list[set[tuple[str, str]]]
    attempts: int
    """How many times kopf sends one request before it gives up (its own retry budget)."""

    async def events(self, count: int) -> list[tuple[str | None, str, str]]:
        """The next ``count`` events the handler got, as (type, name, resourceVersion); raises
        what ended the watcher if it ends first."""
        events: list[tuple[str | None, str, str]] = []
        async with asyncio.timeout(10):
            while len(events) < count:
                get = asyncio.ensure_future(self.delivered.get())
                await asyncio.wait((get, self.task), return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    get.cancel()
                    self.task.result()
                    raise AssertionError("the watcher ended")
                event = get.result()
                meta = event["object"]["metadata"]
                events.append((event["type"], meta["name"], meta["resourceVersion"]))
        return events


@pytest.fixture
async def watcher() -> AsyncIterator[Any]:
    """``start(server)``: kopf's watcher of pods in "ns" against ``server``, started as kopf
    starts it, with kopf's request retries (their number, without their waits) and opsuite's
    backoff after failed attempts (capped at 10 ms)."""
    started: list[tuple[web.AppRunner, credentials.Vault, Watcher]] = []

    async def unrouted(**_: Any) -> str | None:
        raise AssertionError("pods are routed to their handler")

    async def start(server: ApiServer) -> Watcher:
        runner, vault = await serve_for_kopf(server.app())
        settings = kopf.OperatorSettings()
        configure_kopf(settings, parse_options("op", "", [], environ={}))
        retries = settings.networking.error_backoffs  # kopf's default: a tuple of waits
        assert isinstance(retries, tuple)
        settings.networking.error_backoffs = [0.001] * len(retries)
        activity = WatchActivity()
        listed: list[set[tuple[str, str]]] = []
        activity.on_listed(lambda _r, _ns, keys, _rv: listed.append(keys))
        delivered: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
        hooks = Hooks(activity, routes=lambda _group, _plural: delivered.put_nowait)
        kopfwatch.install(hooks, backoff=WatchBackoff(initial=0.001, cap=0.01))
        task = asyncio.create_task(
            queueing.watcher(
                namespace=references.NamespaceName("ns"),
                settings=settings,
                resource=PODS,
                processor=unrouted,
            )
        )
        running = Watcher(server, settings, task, delivered, listed, len(retries) + 1)
        started.append((runner, vault, running))
        return running

    yield start
    for runner, vault, running in started:
        running.task.cancel()
        with contextlib.suppress(BaseException):
            await running.task
        running.server.closing.set()
        await vault.close()
        await runner.cleanup()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "opsuite_common.kopfwatch.listing" and r.levelno == logging.WARNING
    ]


async def test_an_error_event_before_the_initial_events_ended_is_a_failed_attempt(
    watcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server refuses a streaming list inside its 200 stream (ERROR 504 "Too large
    resource version": its watch cache did not catch up with the consistent read in time).
    kopf raises WatchingError for it and never restarts that watcher; here the attempt is
    logged, waited out (WatchBackoff, which the Status's retryAfterSeconds lengthens) and the
    objects are listed in pages: the handler gets them and the watch goes on."""
    server = ApiServer({"a": "5", "b": "7"}, answers=[[ERROR_LINE]])
    running = await watcher(server)
    assert await running.events(2) == [(None, "a", "5"), (None, "b", "7")]
    assert running.listed == [{("ns", "a"), ("ns", "b")}]
    assert server.queries[0]["sendInitialEvents"] == "true"
    assert server.queries[1]["limit"] == str(LIST_CHUNK_SIZE)
    assert not running.task.done()
    assert len(_warnings(caplog)) == 2  # the failed attempt, then the switch to pages
    assert "Too large resource version" in _warnings(caplog)[0]


async def test_an_error_event_after_the_initial_events_ended_resumes_the_watch(
    watcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An ERROR other than 410 Gone once the listing is over ends that watch request only: the
    next one resumes from the last resourceVersion seen, so nothing is listed again and
    nothing is missed."""
    first = [
        _line("ADDED", "a", "5"),
        _line("ADDED", "b", "7"),
        _line("BOOKMARK", "", "100", END),
        _line("MODIFIED", "a", "101"),
        ERROR_LINE,
    ]
    server = ApiServer({}, answers=[first, [_line("MODIFIED", "b", "102")]])
    running = await watcher(server)
    assert await running.events(4) == [
        (None, "a", "5"),
        (None, "b", "7"),
        ("MODIFIED", "a", "101"),
        ("MODIFIED", "b", "102"),
    ]
    resumed = server.queries[1]
    assert resumed["resourceVersion"] == "101"
    assert "sendInitialEvents" not in resumed
    assert running.listed == [{("ns", "a"), ("ns", "b")}]
    assert not running.task.done()
    assert len(_warnings(caplog)) == 1


async def test_a_streaming_list_answered_503_longer_than_kopf_retries_is_tried_again(
    watcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """HTTP 503 to the streaming list for longer than kopf's own retries last: kopf raises
    and never restarts the watcher; here each time kopf gives up is a failed attempt, waited
    out, and the streaming list is sent again until it is answered."""
    server = ApiServer({"a": "5"})
    running = await watcher(server)
    server.answers.extend([503] * (2 * running.attempts))
    assert await running.events(1) == [(None, "a", "5")]
    assert running.listed == [{("ns", "a")}]
    assert len(server.queries) == 2 * running.attempts + 1
    assert all(q["sendInitialEvents"] == "true" for q in server.queries)
    assert running.settings.watching.initial_streaming
    assert len(_warnings(caplog)) == 2


@pytest.mark.parametrize("status", [503, 429])
async def test_a_resumed_watch_answered_an_error_longer_than_kopf_retries_resumes_later(
    watcher: Any, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    """The same for the watch that resumes a listed stream (503, or 429: kopf lists again
    after it, 0.1 s after its retries): each time kopf gives up is a failed attempt, waited
    out, and the watch resumes from the last resourceVersion once answered."""
    listing = [_line("ADDED", "a", "5"), _line("BOOKMARK", "", "100", END)]
    server = ApiServer({}, answers=[listing])
    running = await watcher(server)
    server.answers.extend([status] * (2 * running.attempts) + [[_line("MODIFIED", "a", "101")]])
    assert await running.events(2) == [(None, "a", "5"), ("MODIFIED", "a", "101")]
    resumed = server.queries[1:]
    assert len(resumed) == 2 * running.attempts + 1
    assert all(q.get("resourceVersion") == "100" and "sendInitialEvents" not in q for q in resumed)
    assert len(_warnings(caplog)) == 2


async def test_a_paged_list_answered_503_longer_than_kopf_retries_is_tried_again(
    watcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The same for a page of LIST, where streaming lists are refused."""
    server = ApiServer({"a": "5"})
    running = await watcher(server)
    server.answers.extend([422] + [503] * (2 * running.attempts))
    assert await running.events(1) == [(None, "a", "5")]
    assert running.listed == [{("ns", "a")}]
    assert all(q["limit"] == str(LIST_CHUNK_SIZE) for q in server.queries[1:])
    assert len(_warnings(caplog)) == 3  # the switch to pages, then the two failed attempts


@pytest.mark.parametrize("refused", [False, True], ids=["streaming", "paged"])
async def test_a_relisting_keeps_what_the_operator_wrote_after_its_snapshot(
    listing: Any, refused: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy the operator created while a relisting was under way is cached from the write's
    answer, newer than the listing's snapshot (resourceVersion 100, the streaming list's
    bookmark or the paged list's): it stays, and no handler hears it DELETED (it did, and the
    next pass created it again, got 409 and requeued until the watch caught up). A record
    older than the snapshot that the listing lacks goes, and so does one whose
    resourceVersion is not an integer (nothing orders it)."""
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    store = Store("pods")
    deleted: list[str] = []

    def on_event(event_type: str | None, obj: JSON, _old: JSON | None) -> None:
        if event_type == "DELETED":
            deleted.append(obj["metadata"]["name"])

    manager.watch("", "v1", "pods", store=store, on_event=on_event)
    for name, rv in (("written", "120"), ("gone", "99"), ("opaque", "x120")):
        store.apply(
            "MODIFIED", {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}}
        )
    await listing(ApiServer({"a": "5"}, answers=[422] if refused else []), manager=manager)
    kept = sorted(object_key(o)[1] for o in store.items())
    assert (kept, sorted(deleted)) == (["a", "written"], ["gone", "opaque"])


@pytest.fixture
async def raw_watch() -> AsyncIterator[Any]:
    """``run(chunks, stream)``: what ``stream`` (kopf's ``api.stream`` or a replacement) yields
    for a watch of pods in "ns" whose response body is ``chunks``, each sent on its own."""
    runners: list[web.AppRunner] = []

    async def run(chunks: list[bytes], stream: Any) -> list[Any]:
        async def pods(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse()
            await response.prepare(request)
            for chunk in chunks:
                await response.write(chunk)
                await asyncio.sleep(0.01)  # its own read on the client's side
            return response

        app = web.Application()
        app.router.add_get(PATH, pods)
        runner, vault = await serve_for_kopf(app)
        runners.append(runner)
        url = PODS.get_url(namespace=references.NamespaceName("ns"), params={"watch": "true"})
        logger = logging.getLogger(__name__)
        settings = kopf.OperatorSettings()
        try:
            async with asyncio.timeout(10):
                return [i async for i in stream(url, settings=settings, logger=logger)]
        finally:
            await vault.close()

    yield run
    for runner in runners:
        await runner.cleanup()


async def test_the_watch_stream_yields_the_events_kopf_parses(raw_watch: Any) -> None:
    """opsuite's rewrite of kopf's ``api.stream`` (orjson, from the bytes) yields what kopf's
    own does, for lines split across reads (inside a multi-byte character too), a line of
    3 MiB (a large annotation; kopf's line reader has no line limit), blank lines and a last
    line without its newline; a response the server ends cleanly marks the watch alive."""
    huge = {"big": "x" * (3 << 20)}
    events = [
        _line("ADDED", "a", "5"),
        json.dumps(
            {"type": "ADDED", "object": {"metadata": {"name": "b", "labels": {"note": "naïve ✓"}}}},
            ensure_ascii=False,  # as the API server sends text: UTF-8
        ).encode()
        + b"\n",
        _line("MODIFIED", "c", "7", huge),
        _line("BOOKMARK", "", "100", END),
    ]
    body = b"".join(events[:3]) + b"\n" + events[3].rstrip(b"\n")
    split = body.index("✓".encode()) + 1  # inside the character's three bytes
    chunks = [body[:10], body[10:split], body[split : split + 100], body[split + 100 :]]
    kopfs = await raw_watch(chunks, api.stream)
    clock = FakeClock(100)
    activity = WatchActivity(clock)
    kopfwatch.install(Hooks(activity))
    clock.now = 150
    ours = await raw_watch(chunks, api.stream)
    assert ours == kopfs == [json.loads(e) for e in events]
    clock.now = 200
    assert activity.silent(["pods"], ["ns"], longer_than=60) == []  # silent since 150, not 100
