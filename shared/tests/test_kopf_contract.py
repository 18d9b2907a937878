"""Contract tests: the behaviours of the installed kopf that opsuite_common.kopfwatch and
manager.py rely on, each pinned by a named test against kopf's own (unpatched) functions, so a
kopf upgrade that changes one fails here, not in production. check_kopf_shape() checks the
names and signatures; these check what the functions do. Inputs come from a real local HTTP
server or small fakes of what kopf is given; kopf itself is never mocked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import kopf
import pytest
from aiohttp import web
from kopf._cogs.aiokits import aiotoggles
from kopf._cogs.clients import api, errors, watching
from kopf._cogs.structs import credentials, references
from kopf._core.reactor import orchestration, queueing, running

from opsuite_testkit.local_server import address, kopf_unpatched, serve_for_kopf

PODS = references.Resource(group="", version="v1", plural="pods", namespaced=True)
NS = references.NamespaceName("ns")
PATH = "/api/v1/namespaces/ns/pods"
END = {"k8s.io/initial-events-end": "true"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture(autouse=True)
def _kopf_unpatched(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's own functions, put back as they were after the test."""
    kopf_unpatched(monkeypatch)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """``serve(handler)``: answer the pods of "ns" with ``handler`` on a free local port, and
    point kopf's credentials at it; returns the server's address."""
    runners: list[tuple[web.AppRunner, credentials.Vault]] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_get(PATH, handler)
        runner, vault = await serve_for_kopf(app, shutdown_timeout=0.1)
        runners.append((runner, vault))
        return f"http://{address(runner)}"

    yield start
    for runner, vault in runners:
        await vault.close()
        await runner.cleanup()


def _settings(*, initial_streaming: bool = True) -> kopf.OperatorSettings:
    """kopf's settings with no waits between request retries (there are none)."""
    settings = kopf.OperatorSettings()
    settings.watching.initial_streaming = initial_streaming
    settings.networking.error_backoffs = []
    return settings


def _event(kind: str, name: str, rv: str, annotations: dict[str, str] | None = None) -> Any:
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "resourceVersion": rv}
    if annotations:
        meta["annotations"] = annotations
    return {"type": kind, "object": {"metadata": meta}}


def _line(event: Any) -> bytes:
    return json.dumps(event).encode() + b"\n"


def _watch(*events: Any, then: Callable[[], Awaitable[None]] | None = None) -> Handler:
    """A watch that sends ``events`` then waits for ``then`` (forever by default); a LIST
    holds pods a and b."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            items = [_event("", n, rv)["object"] for n, rv in [("a", "1"), ("b", "2")]]
            meta = {"resourceVersion": "2"}
            return web.json_response({"kind": "PodList", "metadata": meta, "items": items})
        response = web.StreamResponse()
        await response.prepare(request)
        for event in events:
            await response.write(_line(event))
        await (then or asyncio.Event().wait)()
        return response

    return handler


async def _take(stream: AsyncIterator[Any], count: int) -> list[Any]:
    """The first ``count`` items of ``stream`` (closed after), as (type, name) or the item."""
    taken: list[Any] = []
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        async with asyncio.timeout(5):
            async for item in stream:
                if isinstance(item, dict):
                    item = (item["type"], item["object"]["metadata"].get("name"))
                taken.append(item)
                if len(taken) == count:
                    break
    return taken


def _continuous(settings: kopf.OperatorSettings) -> AsyncIterator[Any]:
    return watching.continuous_watch(
        settings=settings, resource=PODS, namespace=NS, operator_pause_waiter=asyncio.Future()
    )


STREAMING_LIST = (
    _event("ADDED", "a", "1"),
    _event("ADDED", "b", "2"),
    _event("BOOKMARK", "", "2", END),
    _event("ADDED", "c", "3"),
)


# 1. The listing's objects are events of type None (kopfwatch.listing's infinite_watch
# collects them as the listing, which caches reconcile against at Bookmark.LISTED).


async def test_a_streaming_lists_added_events_come_as_type_none_until_its_bookmark(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    await serve(_watch(*STREAMING_LIST))
    taken = await _take(_continuous(_settings()), 5)
    assert [t for t in taken if isinstance(t, tuple)] == [
        (None, "a"),
        (None, "b"),
        ("BOOKMARK", ""),
        ("ADDED", "c"),
    ]


# 2. Bookmark.LISTED follows the listing's last object and precedes everything after it: the
# raw BOOKMARK that ends a streaming list, or the first watch event after a paged list.


async def test_listed_comes_after_a_streaming_lists_objects_and_before_its_bookmark(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    await serve(_watch(*STREAMING_LIST))
    taken = await _take(_continuous(_settings()), 5)
    listed = watching.Bookmark.LISTED
    assert taken == [(None, "a"), (None, "b"), listed, ("BOOKMARK", ""), ("ADDED", "c")]


async def test_listed_comes_after_a_paged_lists_objects_and_before_the_watch(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    await serve(_watch(_event("ADDED", "c", "3")))
    taken = await _take(_continuous(_settings(initial_streaming=False)), 4)
    assert taken == [(None, "a"), (None, "b"), watching.Bookmark.LISTED, ("ADDED", "c")]


# 3. What kopf's watch_objs swallows (the stream just ends: the wrapper in kopfwatch.listing
# reads a streaming list ended early from that) and what propagates (the wrapper waits out
# APIServerError and APITooManyRequestsError, and lists in pages after an APIClientError).


def _cut() -> Handler:
    """A watch whose connection is cut in the middle of a line."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(_line(_event("ADDED", "a", "1")) + b'{"type": "ADD')
        assert request.transport is not None
        request.transport.close()
        return response

    return handler


def _answered(code: int) -> Handler:
    async def handler(_: web.Request) -> web.StreamResponse:
        status = {"kind": "Status", "code": code, "message": f"answered {code}"}
        return web.json_response(status, status=code)

    return handler


def _watch_objs(settings: kopf.OperatorSettings) -> AsyncIterator[Any]:
    return watching.watch_objs(
        settings=settings, resource=PODS, namespace=NS, operator_pause_waiter=asyncio.Future()
    )


@pytest.mark.parametrize(
    ("handler", "inactivity"),
    [(_cut(), 5.0), (_watch(_event("ADDED", "a", "1")), 0.2)],
    ids=["connection cut", "inactivity timeout"],
)
async def test_watch_objs_ends_quietly_on_a_cut_or_silent_stream(
    serve: Callable[[Handler], Awaitable[str]], handler: Handler, inactivity: float
) -> None:
    await serve(handler)
    settings = _settings()
    settings.watching.inactivity_timeout = inactivity
    assert await _take(_watch_objs(settings), 2) == [("ADDED", "a")]


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (500, errors.APIServerError),
        (503, errors.APIServerError),
        (429, errors.APITooManyRequestsError),
        (403, errors.APIForbiddenError),
        (410, errors.APIClientError),
    ],
)
async def test_watch_objs_propagates_an_error_answer(
    serve: Callable[[Handler], Awaitable[str]], code: int, error: type[errors.APIError]
) -> None:
    await serve(_answered(code))
    with pytest.raises(error) as raised:
        await _take(_watch_objs(_settings()), 1)
    assert (raised.value.status, raised.value.message) == (code, f"answered {code}")


# 4. An ERROR event other than 410 ends kopf's watch with WatchingError (the wrapper keeps
# such events from kopf and waits them out); "410 Gone" ends the stream quietly, and kopf's
# infinite_watch lists again (the wrapper passes those through).


async def test_an_error_event_raises_watching_error_with_its_status(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    status = {"kind": "Status", "code": 500, "message": "Too large resource version"}
    await serve(_watch({"type": "ERROR", "object": status}))
    with pytest.raises(watching.WatchingError) as raised:
        await _take(_continuous(_settings()), 1)
    assert "'code': 500" in str(raised.value)
    assert "Too large resource version" in str(raised.value)


async def test_a_410_error_event_ends_the_watch_quietly(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    status = {"kind": "Status", "code": 410, "message": "too old resource version"}
    await serve(_watch(*STREAMING_LIST[:3], {"type": "ERROR", "object": status}))
    taken = await _take(_continuous(_settings()), 10)
    assert taken == [(None, "a"), (None, "b"), watching.Bookmark.LISTED, ("BOOKMARK", "")]


# 5. kopf calls each function opsuite patches through its module attribute, at call time.


async def _events(*_: Any, **kwargs: Any) -> AsyncIterator[Any]:
    """A stand-in for a patched kopf function: one pod event; records its keyword arguments."""
    _events.calls.append(kwargs)  # type: ignore[attr-defined]
    yield _event("ADDED", "fake", "1")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    recorded: list[dict[str, Any]] = []
    monkeypatch.setattr(_events, "calls", recorded, raising=False)
    return recorded


async def test_continuous_watch_calls_watching_watch_objs(
    monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(watching, "watch_objs", _events)
    assert await _take(_continuous(_settings()), 1) == [(None, "fake")]
    assert calls[0]["since"] is None


async def test_watch_objs_calls_api_stream(
    monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(api, "stream", _events)
    assert await _take(_watch_objs(_settings()), 1) == [("ADDED", "fake")]
    assert "sendInitialEvents=true" in calls[0]["url"]


async def test_the_watcher_calls_watching_infinite_watch(
    monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(watching, "infinite_watch", _events)
    processed: asyncio.Queue[Any] = asyncio.Queue()

    async def processor(*, raw_event: Any, **_: Any) -> None:
        processed.put_nowait(raw_event)

    settings = _settings()
    settings.queueing.exit_timeout = 0.1
    task = asyncio.create_task(
        queueing.watcher(namespace=NS, settings=settings, resource=PODS, processor=processor)
    )
    async with asyncio.timeout(5):
        raw_event = await processed.get()
        await task
    assert raw_event["object"]["metadata"]["name"] == "fake"
    assert calls[0]["resource"] is PODS


async def test_orchestration_spawns_queueing_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned: asyncio.Future[dict[str, Any]] = asyncio.Future()

    async def watcher(**kwargs: Any) -> None:
        spawned.set_result(kwargs)

    monkeypatch.setattr(queueing, "watcher", watcher)
    ensemble = orchestration.Ensemble(
        operator_indexed=aiotoggles.ToggleSet(all),
        operator_paused=aiotoggles.ToggleSet(any),
        peering_missing=aiotoggles.Toggle(),
    )

    async def processor(**_: Any) -> None:
        raise AssertionError("the stand-in watcher processes nothing")

    await orchestration.spawn_missing_watchers(
        processor=processor,
        settings=_settings(),
        indexed_resources=(),
        watched_resources=[PODS],
        watched_namespaces=[NS],
        ensemble=ensemble,
    )
    async with asyncio.timeout(5):
        assert (await spawned)["resource"] is PODS
        await asyncio.gather(*ensemble.watcher_tasks.values())


async def test_api_request_calls_errors_check_response(
    monkeypatch: pytest.MonkeyPatch, serve: Callable[[Handler], Awaitable[str]]
) -> None:
    await serve(_answered(403))
    checked: list[int] = []

    async def check_response(response: aiohttp.ClientResponse) -> None:
        checked.append(response.status)

    monkeypatch.setattr(errors, "check_response", check_response)
    response = await api.request(
        "get", PATH, settings=_settings(), logger=logging.getLogger(__name__)
    )
    response.close()
    assert checked == [403]


# 6. check_response reads the error's Status with ``json()`` and, when that succeeds, never
# ``text()``: the wrapper hands it a protobuf Status already decoded through ``json()``.


class _Recorded:
    """A real answer whose ``json()`` gives ``payload`` (as the wrapper's decoded protobuf
    Status does); records which of ``json()`` and ``text()`` were read."""

    def __init__(self, response: aiohttp.ClientResponse, payload: Any) -> None:
        self._response = response
        self._payload = payload
        self.read: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    async def json(self) -> Any:
        self.read.append("json")
        return self._payload

    async def text(self) -> str:
        self.read.append("text")
        return ""


async def test_check_response_takes_the_status_from_json_and_reads_no_text(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    async def protobuf_403(_: web.Request) -> web.StreamResponse:
        return web.Response(
            status=403, body=b"k8s\x00\x0a", content_type="application/vnd.kubernetes.protobuf"
        )

    url = await serve(protobuf_403) + PATH
    status = {
        "kind": "Status",
        "code": 403,
        "message": "pods is forbidden",
        "details": {"retryAfterSeconds": 3},
    }
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        recorded = _Recorded(response, status)
        with pytest.raises(errors.APIForbiddenError) as raised:
            await errors.check_response(recorded)  # type: ignore[arg-type]
    assert recorded.read == ["json"]
    assert (raised.value.status, raised.value.message) == (403, "pods is forbidden")
    assert dict(raised.value.details or {}) == {"retryAfterSeconds": 3}


# 7. Stopping: manager.py stops kopf with a stop flag and turns its ultimate exiting timer off;
# it starts its workers before kopf, which leaves tasks that existed before it alone.


def _kill_timers() -> list[asyncio.TimerHandle]:
    loop = asyncio.get_running_loop()
    scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
    return [h for h in scheduled if h._callback is signal.pthread_kill and not h.cancelled()]  # type: ignore[attr-defined]


async def _terminated(exiting: float | None, stop_flag: asyncio.Event) -> list[asyncio.TimerHandle]:
    """The SIGKILL timers kopf's ultimate termination task leaves when cancelled (kopf's
    shutdown) with ``exiting`` as its timeout and ``stop_flag``; cancelled right away."""
    settings = kopf.OperatorSettings()
    settings.process.ultimate_exiting_timeout = exiting
    task = asyncio.create_task(running.ultimate_termination(settings=settings, stop_flag=stop_flag))
    await asyncio.sleep(0)  # the task waits
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    timers = _kill_timers()
    for timer in timers:
        timer.cancel()
    return timers


async def test_a_stop_without_the_stop_flag_starts_the_kill_timer() -> None:
    """The control case: the two tests below would see the timer if kopf started it."""
    assert len(await _terminated(5.0, asyncio.Event())) == 1


async def test_a_stop_flag_set_before_the_stop_starts_no_kill_timer() -> None:
    stop_flag = asyncio.Event()
    stop_flag.set()
    assert await _terminated(5.0, stop_flag) == []


async def test_no_ultimate_exiting_timeout_starts_no_kill_timer() -> None:
    assert await _terminated(None, asyncio.Event()) == []


async def test_run_tasks_leaves_ignored_tasks_alone_and_waits_for_later_ones() -> None:
    stop_worker = asyncio.Event()
    worker = asyncio.create_task(stop_worker.wait(), name="worker started before kopf")
    existing = asyncio.all_tasks()

    async def root() -> None:
        """A root task ending, as kopf's stop-flag checker does once the flag is set."""

    # Work that outlasts the root tasks' stop, well within kopf's wait for such tasks.
    later = asyncio.create_task(asyncio.sleep(0.2), name="task started after kopf")
    async with asyncio.timeout(5):
        await running.run_tasks([asyncio.create_task(root())], ignored=existing)
    assert later.done()
    assert not later.cancelled()
    assert not worker.done()
    stop_worker.set()
    await worker
