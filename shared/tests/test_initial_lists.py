"""Initial lists through kopf's own watch code, as patched by opsuite, against a real local
HTTP server that speaks the API server's list and watch protocol (no mocked client)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import pytest
from aiohttp import web
from kopf._cogs.clients import api, auth, fetching, watching
from kopf._cogs.structs import credentials, references

from opsuite_common.kopf_settings import (
    LIST_CHUNK_SIZE,
    WatchActivity,
    configure_kopf,
    track_watch_activity,
)
from opsuite_common.manager import Manager
from opsuite_common.options import parse_options
from opsuite_common.store import JSON, Store, object_key
from opsuite_testkit import FakeClock, offline_manager

PODS = references.Resource(group="", version="v1", plural="pods", namespaced=True)
PATH = "/api/v1/namespaces/ns/pods"
END = {"k8s.io/initial-events-end": "true"}


@dataclass
class ApiServer:
    """Pods by name (their resourceVersion), and how it answers a streaming list."""

    pods: dict[str, str]
    streaming: str = "complete"
    """"complete", "cut" (ends after the first object, once) or "refused" (422)."""
    after_cut: dict[str, str] | None = None
    """The pods from the moment the stream is cut."""
    queries: list[dict[str, str]] = field(default_factory=list)
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        async def pods(request: web.Request) -> web.StreamResponse:
            query = dict(request.query)
            self.queries.append(query)
            if query.get("watch") != "true":
                return self._list(query)
            if query.get("sendInitialEvents") != "true":
                await self.closing.wait()  # a resumed watch: nothing happens
            if self.streaming == "refused":
                status = {"kind": "Status", "code": 422, "message": "sendInitialEvents forbidden"}
                return web.json_response(status, status=422)
            response = web.StreamResponse()
            await response.prepare(request)
            for name, rv in list(self.pods.items()):
                await response.write(self._event("ADDED", name, rv))
                if self.streaming == "cut":
                    self.streaming = "complete"
                    self.pods = dict(self.after_cut or self.pods)
                    return response  # the connection ends before the bookmark
            await response.write(self._event("BOOKMARK", "", "100", END))
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

    @staticmethod
    def _event(kind: str, name: str, rv: str, annotations: dict[str, str] | None = None) -> bytes:
        meta: dict[str, Any] = {"namespace": "ns", "name": name, "resourceVersion": rv}
        if annotations:
            meta["annotations"] = annotations
        return json.dumps({"type": kind, "object": {"metadata": meta}}).encode() + b"\n"


async def _serve(app: web.Application) -> tuple[web.AppRunner, credentials.Vault]:
    """Serve ``app`` on a free local port and point kopf's credentials at it."""
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    vault = credentials.Vault()
    host = f"http://127.0.0.1:{runner.addresses[0][1]}"
    await vault.populate({"test": credentials.ConnectionInfo(server=host)})
    auth.vault_var.set(vault)
    return runner, vault


@pytest.fixture
async def listing() -> AsyncIterator[Any]:
    """``run(server, manager)``: kopf's watch of pods in "ns" against ``server`` until its
    first listing ended, its events delivered to ``manager``'s route of pods (if given, as
    the routed watcher does); returns what it yielded, the listings reported and the
    settings."""
    runners: list[tuple[web.AppRunner, ApiServer]] = []
    originals = (watching.infinite_watch, watching.watch_objs, fetching.fetch_objs, api.stream)

    async def run(
        server: ApiServer, manager: Manager | None = None
    ) -> tuple[list[Any], list[set[tuple[str, str]]], Any]:
        runner, vault = await _serve(server.app())
        runners.append((runner, server))
        settings = kopf.OperatorSettings()
        configure_kopf(settings, parse_options("op", "", [], environ={}))
        activity = WatchActivity() if manager is None else manager.activity
        deliver = None if manager is None else manager._routes[("", "pods")]
        listed: list[set[tuple[str, str]]] = []
        activity.on_listed(lambda _r, _ns, keys, _rv: listed.append(keys))
        track_watch_activity(activity)
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
    watching.infinite_watch, watching.watch_objs, fetching.fetch_objs, api.stream = originals
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
    server = ApiServer({"a": "5", "b": "7"}, streaming="cut", after_cut={"a": "5", "c": "9"})
    seen, listed, settings = await listing(server)
    assert listed == [{("ns", "a"), ("ns", "c")}]
    assert _names(seen)[-3:] == ["a", "c", None]
    assert [q.get("sendInitialEvents") for q in server.queries] == ["true", None]
    assert server.queries[1]["limit"] == str(LIST_CHUNK_SIZE)
    assert not settings.watching.initial_streaming


async def test_an_api_server_refusing_streaming_lists_is_listed_in_pages(listing: Any) -> None:
    """WatchList disabled on the API server (422): the operator lists in pages instead of
    losing the watch."""
    server = ApiServer({"a": "5"}, streaming="refused")
    seen, listed, settings = await listing(server)
    assert _names(seen) == ["a", None]
    assert listed == [{("ns", "a")}]
    assert server.queries[1]["limit"] == str(LIST_CHUNK_SIZE)
    assert not settings.watching.initial_streaming


@pytest.mark.parametrize("streaming", ["complete", "refused"])
async def test_a_relisting_keeps_what_the_operator_wrote_after_its_snapshot(
    listing: Any, streaming: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    await listing(ApiServer({"a": "5"}, streaming=streaming), manager)
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
        runner, vault = await _serve(app)
        runners.append(runner)
        url = PODS.get_url(namespace=references.NamespaceName("ns"), params={"watch": "true"})
        logger = logging.getLogger(__name__)
        settings = kopf.OperatorSettings()
        try:
            async with asyncio.timeout(10):
                return [i async for i in stream(url, settings=settings, logger=logger)]
        finally:
            await vault.close()

    originals = (watching.infinite_watch, watching.watch_objs, fetching.fetch_objs, api.stream)
    yield run
    watching.infinite_watch, watching.watch_objs, fetching.fetch_objs, api.stream = originals
    for runner in runners:
        await runner.cleanup()


async def test_the_watch_stream_yields_the_events_kopf_parses(raw_watch: Any) -> None:
    """opsuite's rewrite of kopf's ``api.stream`` (orjson, from the bytes) yields what kopf's
    own does, for lines split across reads (inside a multi-byte character too), a line of
    3 MiB (a large annotation; kopf's line reader has no line limit), blank lines and a last
    line without its newline; a response the server ends cleanly marks the watch alive."""
    huge = {"big": "x" * (3 << 20)}
    events = [
        ApiServer._event("ADDED", "a", "5"),
        json.dumps(
            {"type": "ADDED", "object": {"metadata": {"name": "b", "labels": {"note": "naïve ✓"}}}},
            ensure_ascii=False,  # as the API server sends text: UTF-8
        ).encode()
        + b"\n",
        ApiServer._event("MODIFIED", "c", "7", huge),
        ApiServer._event("BOOKMARK", "", "100", END),
    ]
    body = b"".join(events[:3]) + b"\n" + events[3].rstrip(b"\n")
    split = body.index("✓".encode()) + 1  # inside the character's three bytes
    chunks = [body[:10], body[10:split], body[split : split + 100], body[split + 100 :]]
    kopfs = await raw_watch(chunks, api.stream)
    clock = FakeClock(100)
    activity = WatchActivity(clock)
    track_watch_activity(activity)
    clock.now = 150
    ours = await raw_watch(chunks, api.stream)
    assert ours == kopfs == [json.loads(e) for e in events]
    clock.now = 200
    assert activity.silent(["pods"], ["ns"], longer_than=60) == []  # silent since 150, not 100
