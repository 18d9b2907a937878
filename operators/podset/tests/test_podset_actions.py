"""Executing a plan: Events like the ReplicaSet controller's, expectations kept honest on errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from opsuite_common.events import EventRecorder
from opsuite_common.kube import ApiException, KubeApi
from opsuite_common.metrics import REGISTRY
from opsuite_common.store import JSON, ObjectKey
from podset_operator import metrics
from podset_operator.actions import api_error, apply_plan
from podset_operator.expectations import Expectations
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.reconcile import plan
from podset_operator.status import FAILED_CREATE, FAILED_DELETE, FAILED_REVISION
from podset_operator.template import template_hash

KEY = "ns/web"
TEMPLATE: JSON = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}


def podset(replicas: int) -> JSON:
    return {
        "apiVersion": "apps.opsuite.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {"replicas": replicas, "template": TEMPLATE},
    }


def owned_pod(name: str) -> JSON:
    ref = {"apiVersion": "apps.opsuite.dev/v1alpha1", "kind": "PodSet", "name": "web"}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": "web", "apps.opsuite.dev/podset": "web"},
            "ownerReferences": [{**ref, "uid": "u-1", "controller": True}],
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def status_error(code: int, message: str, name: str = "") -> ApiException:
    error = ApiException(status=code, reason="Invalid")
    error.body = json.dumps(
        {"kind": "Status", "message": message, "details": {"name": name, "kind": "pods"}}
    )
    return error


class FakeKube:
    """Answers pod creates/deletes and Event and status writes; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.create_errors: list[BaseException] = []
        self.delete_errors: dict[str, BaseException] = {}
        self.live: JSON | None = {"metadata": {"name": "web", "uid": "u-1"}}
        """What an uncached read of the PodSet answers (None: deleted)."""
        self.revisions: dict[str, JSON] = {}
        """ControllerRevisions that exist, by name: a create of one of them answers 409."""
        self._names = iter(range(1000))

    def _answer(self, outcome: Any) -> asyncio.Future[JSON]:
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
        return future

    async def get(self, path: str) -> JSON | None:
        self.calls.append(("get", path, None))
        if "/controllerrevisions/" in path:
            return self.revisions.get(path.rsplit("/", 1)[1])
        return self.live

    def create(self, path: str, body: Mapping[str, Any]) -> asyncio.Future[JSON]:
        self.calls.append(("create", path, body))
        if path.endswith("/pods") and self.create_errors:
            return self._answer(self.create_errors.pop(0))
        if path.endswith("/controllerrevisions") and body["metadata"]["name"] in self.revisions:
            return self._answer(status_error(409, "already exists"))
        name = (
            body["metadata"].get("name") or f"{body['metadata']['generateName']}{next(self._names)}"
        )
        return self._answer({**body, "metadata": {**body["metadata"], "name": name}})

    def patch(self, path: str, patch: object, *, patch_type: str = "merge") -> asyncio.Future[JSON]:
        self.calls.append(("patch", path, patch))
        return self._answer({})

    def delete(self, path: str, **options: Any) -> asyncio.Future[JSON]:
        self.calls.append(("delete", path, options))
        name = path.rsplit("/", 1)[1]
        return self._answer(self.delete_errors.get(name, {}))

    def events(self) -> list[JSON]:
        return [body for verb, path, body in self.calls if verb == "create" and "/events" in path]

    def pod_creates(self) -> int:
        return sum(verb == "create" and path.endswith("/pods") for verb, path, _ in self.calls)

    def status_patches(self) -> list[Any]:
        return [body for verb, path, body in self.calls if path.endswith("/status")]


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def recorder(kube: FakeKube) -> EventRecorder:
    return EventRecorder(kube, "podset-operator", "test")


async def run(
    kube: FakeKube,
    recorder: EventRecorder,
    expectations: Expectations,
    ps: JSON,
    pods: list[JSON],
    revisions: list[JSON] | None = None,
) -> Any:
    actions = plan(ps, pods, datetime.now(UTC), True, revisions=revisions)
    result = await apply_plan(cast(KubeApi, kube), recorder, expectations, KEY, ps, pods, actions)
    await recorder.flush()
    return result


async def test_creates_are_reported_as_successful_create_events(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    expectations = Expectations()
    assert await run(kube, recorder, expectations, podset(3), []) is None
    assert kube.pod_creates() == 3
    messages = sorted(e["message"] for e in kube.events())
    assert messages == ["Created pod: web-0", "Created pod: web-1", "Created pod: web-2"]
    assert {(e["type"], e["reason"]) for e in kube.events()} == {("Normal", "SuccessfulCreate")}
    assert {e["involvedObject"]["kind"] for e in kube.events()} == {"PodSet"}
    assert not expectations.satisfied(KEY, datetime.now(UTC))  # the watch has not seen them yet


@pytest.mark.parametrize(
    "live",
    [None, {"metadata": {"uid": "u-1", "deletionTimestamp": "2026-11-24T20:00:00Z"}},
     {"metadata": {"uid": "u-2"}}],
    ids=["deleted", "being-deleted", "replaced"],
)  # fmt: skip
async def test_no_pod_is_created_for_a_podset_the_cache_still_holds_but_is_gone(
    kube: FakeKube, recorder: EventRecorder, live: JSON | None
) -> None:
    """#20: after a watch gap the pods watch may report the garbage collector's deletions of a
    deleted PodSet's pods before the PodSets watch reports the PodSet's deletion; the stale
    PodSet must not get new pods. An uncached read confirms it before creating."""
    kube.live = live
    expectations = Expectations()
    assert await run(kube, recorder, expectations, podset(3), []) is None
    assert kube.pod_creates() == 0
    assert not kube.events()
    assert not kube.status_patches()
    assert expectations.satisfied(KEY, datetime.now(UTC))


async def test_rejected_creates_degrade_with_a_stable_message_and_a_warning_event(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    message = 'Pod "web-x7k2p" is invalid: spec.containers[0].name: Invalid value: "Bad_Name"'
    kube.create_errors = [status_error(422, message, name="web-x7k2p")]
    expectations = Expectations()
    failure = await run(kube, recorder, expectations, podset(3), [])
    assert failure is not None
    assert failure.reason == FAILED_CREATE
    assert (
        failure.message
        == 'Pod "web-" is invalid: spec.containers[0].name: Invalid value: "Bad_Name"'
    )
    assert kube.pod_creates() == 1  # the first create failed: the rest are never issued
    (event,) = kube.events()
    assert (event["type"], event["reason"]) == ("Warning", "FailedCreate")
    assert event["message"] == f"Error creating: {failure.message}"
    assert expectations.satisfied(KEY, datetime.now(UTC))  # nothing more to wait for
    (status,) = kube.status_patches()
    degraded = [c for c in status["status"]["conditions"] if c["type"] == "Degraded"]
    assert degraded[0]["status"] == "True"
    assert degraded[0]["message"] == failure.message


async def test_a_create_timeout_is_raised_after_un_expecting_the_rest(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    kube.create_errors = [TimeoutError("read timed out")]
    expectations = Expectations()
    with pytest.raises(TimeoutError):
        await run(kube, recorder, expectations, podset(3), [])
    assert expectations.satisfied(KEY, datetime.now(UTC))
    assert not kube.status_patches()


async def test_deletes_are_reported_and_failed_ones_un_expected(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    pods = [owned_pod("web-a"), owned_pod("web-b"), owned_pod("web-c")]
    kube.delete_errors = {"web-b": status_error(500, "etcdserver: request timed out")}
    expectations = Expectations()
    failure = await run(kube, recorder, expectations, podset(1), pods)
    assert failure is not None
    assert (failure.reason, failure.message) == (FAILED_DELETE, "etcdserver: request timed out")
    events = {(e["type"], e["reason"], e["message"]) for e in kube.events()}
    assert ("Warning", "FailedDelete", "Error deleting: etcdserver: request timed out") in events
    deleted = [m for t, r, m in events if r == "SuccessfulDelete"]
    assert len(deleted) == 1
    # Only the successful delete is still expected to show up in the watch.
    assert not expectations.satisfied(KEY, datetime.now(UTC))
    expectations.deletion_observed(KEY, deleted[0].removeprefix("Deleted pod: "))
    assert expectations.satisfied(KEY, datetime.now(UTC))


def test_api_error_without_a_status_body() -> None:
    error = ApiException(status=503, reason="Service Unavailable")
    error.body = "upstream connect error"
    assert api_error(error) == "503 Service Unavailable: upstream connect error"
    assert api_error(status_error(403, 'pods "web-" is forbidden: exceeded quota')) == (
        'pods "web-" is forbidden: exceeded quota'
    )


def test_replica_gauges_are_set_and_removed() -> None:
    key: ObjectKey = ("ns-gauge", "web")
    actions = plan(podset(3), [owned_pod("web-a")], datetime.now(UTC), True)
    metrics.observe(key, actions.status)

    def value(kind: str) -> float | None:
        labels = {"namespace": "ns-gauge", "podset": "web", "kind": kind}
        return REGISTRY.get_sample_value("opsuite_podset_replicas", labels)

    assert (value("desired"), value("current"), value("ready")) == (3, 1, 1)
    metrics.forget(key)
    assert (value("desired"), value("current"), value("ready")) == (None, None, None)
    metrics.forget(key)  # idempotent


def revision(hash_: str, number: int, owner: str | None = "u-1") -> JSON:
    meta: JSON = {
        "name": f"web-{hash_}",
        "namespace": "ns",
        "uid": f"rev-{hash_}",
        "labels": {TEMPLATE_HASH_LABEL: hash_},
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "PodSet", "uid": owner, "controller": True}]
    return {"metadata": meta, "revision": number}


async def test_the_template_is_kept_as_a_revision_before_pods_are_created(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    assert await run(kube, recorder, Expectations(), podset(1), [], revisions=[]) is None
    writes = [(verb, path) for verb, path, _ in kube.calls if verb == "create"]
    assert writes[:2] == [
        ("create", "/apis/apps/v1/namespaces/ns/controllerrevisions"),
        ("create", "/api/v1/namespaces/ns/pods"),
    ]


async def test_a_revision_already_the_podsets_is_fine_one_of_others_degrades(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    name = f"web-{template_hash(TEMPLATE)}"
    kube.revisions[name] = revision(template_hash(TEMPLATE), 1)  # the cache lags our create
    assert await run(kube, recorder, Expectations(), podset(0), [], revisions=[]) is None
    kube.revisions[name] = revision(template_hash(TEMPLATE), 1, owner=None)  # someone else's
    failure = await run(kube, recorder, Expectations(), podset(1), [], revisions=[])
    assert failure is not None
    assert failure.reason == FAILED_REVISION
    assert name in failure.message
    assert kube.pod_creates() == 1  # the pods still come from the spec
    conditions = kube.status_patches()[-1]["status"]["conditions"]
    assert ("Degraded", "True") in {(c["type"], c["status"]) for c in conditions}


async def test_renumbers_and_deletes_name_the_revisions_uid(
    kube: FakeKube, recorder: EventRecorder
) -> None:
    ps = podset(0)
    ps["spec"]["revisionHistoryLimit"] = 0
    current = template_hash(TEMPLATE)
    store = [revision(current, 1), revision("oldoldoldo", 2)]
    assert await run(kube, recorder, Expectations(), ps, [], revisions=store) is None
    base = "/apis/apps/v1/namespaces/ns/controllerrevisions"
    assert (
        "patch",
        f"{base}/web-{current}",
        {"metadata": {"uid": f"rev-{current}"}, "revision": 3},
    ) in kube.calls
    assert (
        "delete",
        f"{base}/web-oldoldoldo",
        {"preconditions": {"uid": "rev-oldoldoldo"}},
    ) in kube.calls
