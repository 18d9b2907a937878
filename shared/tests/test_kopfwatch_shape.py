"""The start-up self-check of the kopf internals opsuite_common.kopfwatch patches."""

from __future__ import annotations

import importlib.metadata
import random
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kopf._cogs.clients import api, fetching, watching
from kopf._core.reactor import queueing

from opsuite_common.kopfwatch import shape
from opsuite_common.kopfwatch.activity import WatchActivity, WatchBackoff, watched_stream
from opsuite_common.kopfwatch.listing import install_listing
from opsuite_common.kopfwatch.shape import KopfShapeError, check_kopf_shape
from opsuite_testkit import FakeClock
from opsuite_testkit.local_server import Hooks, kopf_unpatched


def test_the_installed_kopf_has_the_shape_the_patches_expect() -> None:
    check_kopf_shape()


def test_the_pinned_series_is_the_one_the_project_locks() -> None:
    """pyproject.toml's range and the self-check name the same series as the installed kopf."""
    series = shape.KOPF_SERIES
    installed = importlib.metadata.version("kopf")
    assert installed.startswith(series + ".")
    major, minor = series.split(".")
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"kopf (>={series}.' in pyproject
    assert f',<{major}.{int(minor) + 1})"' in pyproject


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (watching, "infinite_watch"),
        (watching, "watch_objs"),
        (fetching, "fetch_objs"),
        (api, "stream"),
        (queueing, "watcher"),
        (api, "request"),
        (api, "iter_jsonlines"),
    ],
)
def test_a_missing_internal_fails_loudly(
    monkeypatch: pytest.MonkeyPatch, module: object, name: str
) -> None:
    monkeypatch.delattr(module, name)
    with pytest.raises(KopfShapeError, match=name):
        check_kopf_shape()


def test_a_changed_signature_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    async def watcher(*, namespace: object, settings: object) -> None:
        return None

    monkeypatch.setattr(queueing, "watcher", watcher)
    with pytest.raises(KopfShapeError, match="resource_indexed"):
        check_kopf_shape()


def test_a_sync_function_where_a_stream_was_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    def stream(url: str, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(api, "stream", stream)
    with pytest.raises(KopfShapeError, match="stream"):
        check_kopf_shape()


def test_a_missing_listing_bookmark_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    class Bookmark:
        pass

    monkeypatch.setattr(watching, "Bookmark", Bookmark)
    with pytest.raises(KopfShapeError, match="LISTED"):
        check_kopf_shape()


def test_another_kopf_version_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shape, "_kopf_version", lambda: "1.46.0")
    with pytest.raises(KopfShapeError, match=r"1\.46\.0"):
        check_kopf_shape()


async def test_watch_tracking_reports_each_listing_and_every_sign_of_life(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopfwatch.listing passes kopf's stream through unchanged, reports a listing (with its
    objects) when kopf's LISTED bookmark ends it, and marks the watch alive on every item (a
    watch request the server ended cleanly: test_initial_lists.py)."""
    listing = [
        {"type": None, "object": {"metadata": {"namespace": "a", "name": "x"}}},
        {"type": None, "object": {"metadata": {"namespace": "a", "name": "y"}}},
    ]
    items: list[object] = [*listing, watching.Bookmark.LISTED]
    items.append({"type": "ADDED", "object": {"metadata": {"namespace": "a", "name": "z"}}})

    async def infinite_watch(**_: object) -> AsyncIterator[object]:
        for item in items:
            yield item

    kopf_unpatched(monkeypatch)
    monkeypatch.setattr(watching, "infinite_watch", infinite_watch)
    clock = FakeClock(100)
    activity = WatchActivity(clock)
    listed: list[tuple[str, str | None, set[tuple[str, str]], str | None]] = []
    activity.on_listed(lambda r, ns, keys, rv: listed.append((r, ns, keys, rv)))
    install_listing(Hooks(activity))  # not kopfwatch.install: this kopf is not its shape

    resource = SimpleNamespace(plural="pods")
    clock.now = 120
    watch: Any = watching.infinite_watch  # the wrapper, called as kopf calls it
    seen = [i async for i in watch(resource=resource, namespace="a")]
    assert seen == items
    assert listed == [("pods", "a", {("a", "x"), ("a", "y")}, None)]
    assert activity.has_listed(("pods", "a"))
    assert not activity.has_listed(("pods", "b"))
    clock.now = 150
    assert activity.silent(["pods"], ["a", "b"], longer_than=40) == ["pods in b"]


def test_a_live_stream_does_not_mask_a_silent_one_of_the_same_resource() -> None:
    """Per (resource, namespace) stream: with two namespaces served, the pods watch of one
    going silent is reported even though the other keeps streaming; a cluster-scoped
    resource, which kopf watches once cluster-wide, is one stream."""
    clock = FakeClock(0)
    activity = WatchActivity(clock)
    activity.start()
    for t in range(0, 200, 10):
        clock.now = t
        activity.mark("pods", "busy")
        activity.mark("namespaces", None)
    activity.mark("pods", "quiet")
    clock.now = 200
    assert activity.silent(["namespaces", "pods"], ["busy", "quiet"], 120) == []
    clock.now = 400
    assert activity.silent(["pods"], ["busy", "quiet"], 120) == ["pods in busy", "pods in quiet"]
    activity.mark("pods", "busy")
    activity.mark("namespaces", None)
    assert activity.silent(["namespaces", "pods"], ["busy", "quiet"], 120) == ["pods in quiet"]
    # A stream never seen is silent since start().
    assert activity.silent(["configmaps"], ["busy"], 120) == ["configmaps in busy"]
    activity.start()
    assert activity.silent(["configmaps"], ["busy"], 120) == []


def test_a_failed_watch_attempt_waits_as_client_gos_reflector_does() -> None:
    """0.8 s doubling up to 30 s, each wait plus up to as much again of jitter; never less
    than the API server's retryAfterSeconds, bounded by the same 30 s; per stream; from 0.8 s
    again once a stream has gone two minutes without a failure."""

    class Halfway(random.Random):
        def random(self) -> float:
            return 0.5

    clock = FakeClock(0)
    backoff = WatchBackoff(clock=clock, rng=Halfway())
    pods, namespaces = ("pods", "a"), ("namespaces", None)
    waits = []
    for _ in range(8):
        waits.append(backoff.delay(pods))
        clock.now += 100
    assert waits == pytest.approx([1.2, 2.4, 4.8, 9.6, 19.2, 38.4, 45, 45])
    assert backoff.delay(namespaces, retry_after=1) == pytest.approx(1.2)
    assert backoff.delay(namespaces, retry_after=5) == 5
    assert backoff.delay(namespaces, retry_after=3600) == 30
    clock.now += 121
    assert backoff.delay(pods) == pytest.approx(1.2)
    assert 0.8 <= WatchBackoff().delay(pods) < 1.6  # jittered


@pytest.mark.parametrize(
    ("url", "stream"),
    [
        ("https://h/api/v1/namespaces/ns/pods?watch=true", ("pods", "ns")),
        ("https://h/api/v1/namespaces?watch=true", ("namespaces", None)),
        ("https://h/apis/opsuite.dev/v1alpha1/podsets", ("podsets", None)),
        (
            "https://h/apis/opsuite.dev/v1alpha1/namespaces/namespaces/podsets",
            ("podsets", "namespaces"),
        ),
    ],
)
def test_a_watch_url_names_its_stream(url: str, stream: tuple[str, str | None]) -> None:
    assert watched_stream(url) == stream
