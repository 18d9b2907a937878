"""EventRecorder: core/v1 Events with client-go's dedupe, aggregation and spam filter."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from opsuite_common.events import COMBINED_PREFIX, MAX_MESSAGE_LENGTH, EventRecorder
from opsuite_common.fence import WriteFenced
from opsuite_common.kube import ApiException
from opsuite_common.store import JSON

PODSET: JSON = {
    "apiVersion": "apps.opsuite.dev/v1alpha1",
    "kind": "PodSet",
    "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web", "generation": 3},
}
OTHER: JSON = {**PODSET, "metadata": {**PODSET["metadata"], "name": "api", "uid": "uid-api"}}


class FakeSink:
    """Stores Events like the API server; with ``hold``, writes stay in flight until released."""

    def __init__(self) -> None:
        self.events: dict[str, JSON] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.hold = False
        self.fail_next: list[Exception] = []
        self._held: list[tuple[asyncio.Future[JSON], Any]] = []

    def _answer(self, outcome: Any) -> asyncio.Future[JSON]:
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if self.hold:
            self._held.append((future, outcome))
        else:
            self._settle(future, outcome)
        return future

    @staticmethod
    def _settle(future: asyncio.Future[JSON], outcome: Any) -> None:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def release(self) -> None:
        held, self._held = self._held, []
        for future, outcome in held:
            self._settle(future, outcome)

    def create(self, path: str, body: Mapping[str, Any]) -> asyncio.Future[JSON]:
        self.calls.append(("create", path, dict(body)))
        if self.fail_next:
            return self._answer(self.fail_next.pop(0))
        name = body["metadata"]["name"]
        self.events[name] = dict(body)
        return self._answer(dict(body))

    def patch(self, path: str, patch: object, *, patch_type: str = "merge") -> asyncio.Future[JSON]:
        self.calls.append(("patch", path, patch))
        name = path.rsplit("/", 1)[1]
        if self.fail_next:
            return self._answer(self.fail_next.pop(0))
        if name not in self.events:
            return self._answer(ApiException(status=404, reason="Not Found"))
        assert isinstance(patch, dict)
        self.events[name].update(patch)
        return self._answer(self.events[name])

    def verbs(self) -> list[str]:
        return [verb for verb, _, _ in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.wall = datetime(2025, 1, 1, 12, tzinfo=UTC)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += timedelta(seconds=seconds)


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def recorder(sink: FakeSink, clock: Clock) -> EventRecorder:
    return EventRecorder(
        sink,
        "podset-operator",
        "host_1234",
        clock=lambda: clock.now,
        wall_clock=lambda: clock.wall,
    )


async def test_posts_a_core_v1_event_about_the_object(
    recorder: EventRecorder, sink: FakeSink
) -> None:
    recorder.warning(PODSET, "FailedCreate", "Error creating: pods is forbidden")
    await recorder.flush()
    ((verb, path, body),) = sink.calls
    assert (verb, path) == ("create", "/api/v1/namespaces/ns/events")
    assert body["metadata"]["name"].startswith("web.")
    assert body["metadata"]["namespace"] == "ns"
    assert body["involvedObject"] == {
        "apiVersion": "apps.opsuite.dev/v1alpha1",
        "kind": "PodSet",
        "name": "web",
        "namespace": "ns",
        "uid": "uid-web",
    }
    assert (body["type"], body["reason"], body["message"]) == (
        "Warning",
        "FailedCreate",
        "Error creating: pods is forbidden",
    )
    assert body["count"] == 1
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2025-01-01T12:00:00Z"
    assert body["source"] == {"component": "podset-operator"}
    assert (body["reportingComponent"], body["reportingInstance"]) == (
        "podset-operator",
        "host_1234",
    )


async def test_identical_events_patch_the_count(
    recorder: EventRecorder, sink: FakeSink, clock: Clock
) -> None:
    recorder.normal(PODSET, "SuccessfulDelete", "Deleted pod: web-1")
    await recorder.flush()
    clock.advance(30)
    recorder.normal(PODSET, "SuccessfulDelete", "Deleted pod: web-1")
    await recorder.flush()
    assert sink.verbs() == ["create", "patch"]
    (event,) = sink.events.values()
    assert event["count"] == 2
    assert event["firstTimestamp"] == "2025-01-01T12:00:00Z"
    assert event["lastTimestamp"] == "2025-01-01T12:00:30Z"
    # A different reason, type or object is a different Event.
    recorder.warning(PODSET, "SuccessfulDelete", "Deleted pod: web-1")
    recorder.normal(PODSET, "Other", "Deleted pod: web-1")
    recorder.normal(OTHER, "SuccessfulDelete", "Deleted pod: web-1")
    await recorder.flush()
    assert len(sink.events) == 4


async def test_repeats_while_a_write_is_in_flight_are_coalesced(
    recorder: EventRecorder, sink: FakeSink
) -> None:
    sink.hold = True
    for _ in range(5):
        recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    assert sink.verbs() == ["create"]
    sink.release()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sink.verbs() == ["create", "patch"]
    sink.release()
    await recorder.flush()
    assert sink.verbs() == ["create", "patch"]
    (event,) = sink.events.values()
    assert event["count"] == 5


async def test_an_old_event_starts_a_new_one_after_the_window(
    recorder: EventRecorder, sink: FakeSink, clock: Clock
) -> None:
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    clock.advance(601)
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert sink.verbs() == ["create", "create"]
    assert [e["count"] for e in sink.events.values()] == [1, 1]


async def test_an_expired_event_is_created_again(recorder: EventRecorder, sink: FakeSink) -> None:
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    sink.events.clear()  # the API server dropped it (Events live an hour)
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert sink.verbs() == ["create", "patch", "create"]
    (event,) = sink.events.values()
    assert event["count"] == 2


async def test_failed_writes_are_logged_and_retried_by_the_next_event(
    recorder: EventRecorder, sink: FakeSink, caplog: pytest.LogCaptureFixture
) -> None:
    sink.fail_next = [ApiException(status=403, reason="Forbidden")]
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert "could not write event Warning FailedCreate about ns/web: 403" in caplog.text
    assert not sink.events
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert sink.verbs() == ["create", "create"]
    (event,) = sink.events.values()
    assert event["count"] == 2


async def test_an_event_the_write_fence_refused_is_dropped_quietly(
    recorder: EventRecorder, sink: FakeSink, caplog: pytest.LogCaptureFixture
) -> None:
    """Leadership ended: the fence refused the write, unsent (#16, item 9); nothing to warn
    about."""
    sink.fail_next = [WriteFenced("POST /api/v1/namespaces/ns/events: refused")]
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert sink.verbs() == ["create"]
    assert "could not write event" not in caplog.text


async def test_many_similar_messages_are_combined(recorder: EventRecorder, sink: FakeSink) -> None:
    for i in range(15):
        recorder.normal(PODSET, "SuccessfulCreate", f"Created pod: web-{i}")
    await recorder.flush()
    events = sorted(sink.events.values(), key=lambda e: e["message"])
    assert len(events) == 10  # nine single ones, then one combined
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(combined) == 1
    assert combined[0]["count"] == 6
    assert combined[0]["message"] == COMBINED_PREFIX + "Created pod: web-14"


async def test_spam_filter_drops_a_flood_and_refills(sink: FakeSink, clock: Clock) -> None:
    recorder = EventRecorder(
        sink,
        "podset-operator",
        "host",
        burst=3,
        refill_seconds=60,
        clock=lambda: clock.now,
        wall_clock=lambda: clock.wall,
    )
    for _ in range(5):
        recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    recorder.warning(OTHER, "FailedCreate", "quota exceeded")  # its own bucket
    await recorder.flush()
    assert recorder.dropped == 2
    # Three of web's events were let through: the create, then one patch for the two that came
    # while it was in flight. That patch carries all five occurrences.
    assert sink.verbs() == ["create", "create", "patch"]
    counts = sorted(e["count"] for e in sink.events.values())
    assert counts == [1, 5]
    clock.advance(60)  # one token back: the next write carries the events not written
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert recorder.dropped == 3
    assert sorted(e["count"] for e in sink.events.values()) == [1, 6]


async def test_long_messages_are_truncated_and_cluster_scoped_objects_use_default(
    recorder: EventRecorder, sink: FakeSink
) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    recorder.warning(node, "Broken", "x" * 5000)
    await recorder.flush()
    ((_, path, body),) = sink.calls
    assert path == "/api/v1/namespaces/default/events"
    assert "namespace" not in body["involvedObject"]
    assert len(body["message"]) == MAX_MESSAGE_LENGTH
    assert body["message"].endswith("...")


async def test_event_names_are_unique(recorder: EventRecorder, sink: FakeSink) -> None:
    for i in range(5):
        recorder.normal(PODSET, f"Reason{i}", "same")
    await recorder.flush()
    assert len(sink.events) == 5


async def test_warnings_have_their_own_spam_budget(sink: FakeSink, clock: Clock) -> None:
    recorder = EventRecorder(
        sink, "c", "i", burst=2, clock=lambda: clock.now, wall_clock=lambda: clock.wall
    )
    for i in range(5):
        recorder.normal(PODSET, "SuccessfulCreate", f"Created pod: web-{i}")
    recorder.warning(PODSET, "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert recorder.dropped == 3
    assert sorted(e["reason"] for e in sink.events.values()) == [
        "FailedCreate",
        "SuccessfulCreate",
        "SuccessfulCreate",
    ]
