"""Carry out a PodDebugger :class:`~poddebugger_operator.reconcile.Plan` through the API.

Every injection is one strategic-merge PATCH of the pod's ``ephemeralcontainers``
subresource adding one container (merge key: its name) after the existing ones. Nothing else
of a pod is written. In mode Copy an injection is a GET of the pod and a POST of its copy
(:mod:`poddebugger_operator.copies`); a record of the copy stands in the pod cache while the
POST is in flight, so no pass creates it twice.

A pass does not wait for its PATCHes (:class:`Injector`): pods matched while they are in
flight go out at once in the next pass, as a plain client would send them.
A pod is marked as holding its container before the PATCH leaves (in the pod cache, through
:mod:`poddebugger_operator.injected`), so no pass sends it twice, however stale the versions
the watch delivers meanwhile; a failed PATCH takes the mark back. A repeat of the same patch
would change nothing anyway: the container of that name is already there, the same.

Refusals (4xx other than 404/409/429) are remembered per debugger and pod and given to the
planner, which reports them and does not try those pods again; transient failures hold the
pod back for a backoff (1 s doubling up to 5 min). The status is written by the pass, paced
(:mod:`opsuite_common.status_pacer`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opsuite_common.fence import WriteFenced
from opsuite_common.kube import ApiException, KubeApi, resource_path
from opsuite_common.protofields import Fields
from opsuite_common.status_pacer import StatusPacer
from opsuite_common.store import JSON, ObjectKey, Store
from poddebugger_operator.copies import copy_pod, is_copy, placeholder
from poddebugger_operator.injected import Injected
from poddebugger_operator.models import API_VERSION, PLURAL
from poddebugger_operator.mounts import WATCHED_VOLUME_FIELDS, slim_volume
from poddebugger_operator.outcome import Injection
from poddebugger_operator.refusals import Failure

log = logging.getLogger(__name__)

RETRYABLE = frozenset({404, 409, 429})
"""Statuses after which a pod is tried again after a backoff (pod replaced, conflict,
throttled); 5xx and connection errors too."""
RETRY_AFTER = 1.0
MAX_RETRY_AFTER = 300.0


@dataclass(frozen=True)
class InjectionResult:
    """How one injection ended: added, refused (``failure``) or to be retried."""

    injection: Injection
    failure: Failure | None = None
    """The API server refused it: reported, not retried."""
    retry_after: float | None = None
    """It failed for a transient reason: the pod is tried again after this many seconds."""


_STATE_FIELDS = {"waiting": ("reason", "message"), "terminated": ("exitCode", "reason", "message")}
"""What the status reports of each ephemeral container's state (``running``: only that)."""


def _slim_state(state: Any) -> JSON:
    """A container state as the status reports it: which one, the kubelet's reason and
    message, the exit code. Timestamps and container ids are dropped, so that they change
    nothing in the cache (and wake no PodDebugger)."""
    if not isinstance(state, Mapping):
        return {}
    for kind in ("running", "terminated", "waiting"):
        if kind in state:
            detail = state[kind] if isinstance(state[kind], Mapping) else {}
            return {kind: {k: detail[k] for k in _STATE_FIELDS.get(kind, ()) if k in detail}}
    return {}


_STATUS_FIELDS: Fields = {
    "name": None,
    "state": {
        "waiting": {"reason": None, "message": None},
        "running": {"startedAt": None},
        "terminated": {"exitCode": None, "reason": None, "message": None},
    },
}
WATCHED_FIELDS: Fields = {
    "spec": {
        "containers": {"name": None, "image": None},
        "initContainers": {"name": None},
        "ephemeralContainers": {"name": None, "image": None},
        "volumes": WATCHED_VOLUME_FIELDS,
    },
    "status": {
        "phase": None,
        "ephemeralContainerStatuses": _STATUS_FIELDS,
        "containerStatuses": _STATUS_FIELDS,
    },
}
"""What the pod watch decodes besides the common metadata (protofields.OBJECT_META): all
that :func:`slim_pod` and the pod handler read."""


def slim_pod(pod: Mapping[str, Any]) -> JSON:
    """What the planner needs of a pod: identity, labels, phase, the names of its containers
    and init containers (a targetContainer must be one), ephemeral containers (name and
    image) and their states (:func:`_slim_state`), the kinds of its volumes (a volume mount
    must name one that holds no credentials: :func:`~poddebugger_operator.mounts.slim_volume`).
    Of a copy (mode Copy, :mod:`poddebugger_operator.copies`) also its containers' images and
    states: one of them is the debug container."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    keep = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp")
    copy = is_copy(pod)
    regular = ("name", "image") if copy else ("name",)
    return {
        "metadata": {k: meta[k] for k in keep if k in meta},
        "spec": {
            **{
                kind: [{k: c.get(k) for k in fields} for c in spec.get(kind) or ()]
                for kind, fields in (("containers", regular), ("initContainers", ("name",)))
                if spec.get(kind)
            },
            "ephemeralContainers": [
                {"name": c.get("name"), "image": c.get("image")}
                for c in spec.get("ephemeralContainers") or ()
            ],
            **(
                {"volumes": [slim_volume(v) for v in volumes if isinstance(v, Mapping)]}
                if (volumes := spec.get("volumes"))
                else {}
            ),
        },
        "status": {
            "phase": status.get("phase"),
            **{
                kind: [
                    {"name": s.get("name"), "state": _slim_state(s.get("state"))}
                    for s in status.get(kind) or ()
                ]
                for kind in ("ephemeralContainerStatuses", *(("containerStatuses",) * copy))
            },
        },
    }


def api_message(exc: ApiException) -> str:
    """The API server's message of an error response (its Status), else the raw body."""
    try:
        body = json.loads(exc.body or "")
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{exc.status} {exc.reason}: {(exc.body or '')[:300]}"


def _inject(kube: KubeApi, injection: Injection) -> asyncio.Future[JSON]:
    meta = injection.pod["metadata"]
    path = resource_path("v1", "pods", meta["namespace"], meta["name"], "ephemeralcontainers")
    # Without an explicit order, a strategic merge puts the patch's items first.
    order = [
        {"name": c.get("name")}
        for c in (injection.pod.get("spec") or {}).get("ephemeralContainers") or ()
        if c.get("name") != injection.container["name"]
    ]
    order.append({"name": injection.container["name"]})
    patch = {
        # A precondition: if the pod was re-created under its name meanwhile, the API server
        # refuses the PATCH (422, "metadata.uid: field is immutable"); nothing reaches the
        # new pod, which the next pass plans for on its own.
        "metadata": {"uid": meta["uid"]},
        "spec": {
            "$setElementOrder/ephemeralContainers": order,
            "ephemeralContainers": [injection.container],
        },
    }
    return kube.patch(path, patch, patch_type="strategic")


async def _create_copy(kube: KubeApi, injection: Injection) -> JSON:
    """GET the pod whole (the cache keeps a slim record) and POST its copy (mode Copy). A pod
    re-created under its name meanwhile is not copied (404: the next pass plans for it)."""
    meta = injection.pod["metadata"]
    assert injection.copy is not None
    pod = await kube.request("GET", resource_path("v1", "pods", meta["namespace"], meta["name"]))
    if (pod.get("metadata") or {}).get("uid") != meta["uid"]:
        raise ApiException(404, "Not Found", '{"message": "the pod was replaced"}')
    body = copy_pod(injection.copy, pod, injection.container)
    return await kube.create(resource_path("v1", "pods", meta["namespace"]), body)


def _send(kube: KubeApi, injection: Injection) -> asyncio.Future[JSON]:
    if injection.copy is None:
        return _inject(kube, injection)
    return asyncio.ensure_future(_create_copy(kube, injection))


class Injector:
    """Sends injections without making the pass wait; reports each outcome to ``on_result``.

    ``on_result(debugger key, result)`` runs on the event loop when a PATCH completes.
    """

    def __init__(
        self,
        kube: KubeApi,
        pods: Store,
        injected: Injected,
        on_result: Callable[[ObjectKey, InjectionResult], None],
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._kube = kube
        self._now = now or (lambda: datetime.now(UTC))
        self._pods = pods
        self._injected = injected
        self._on_result = on_result
        self._clock = clock
        self._refused: dict[ObjectKey, dict[str, Failure]] = {}
        self._backoff: dict[ObjectKey, dict[str, tuple[float, int]]] = {}
        """Per debugger and pod uid: (when the pod may be tried again, failures in a row)."""

    def refused(self, key: ObjectKey) -> dict[str, Failure]:
        """Refusals of ``key``'s injections, by pod uid."""
        return dict(self._refused.get(key, {}))

    def waiting(self, key: ObjectKey) -> set[str]:
        """Uids of pods whose injection for ``key`` is held back by a backoff."""
        now = self._clock()
        return {uid for uid, (due, _) in self._backoff.get(key, {}).items() if due > now}

    def forget_debugger(self, key: ObjectKey) -> None:
        """The PodDebugger is gone."""
        self._refused.pop(key, None)
        self._backoff.pop(key, None)

    def forget_pod(self, uid: str) -> None:
        """The pod is gone."""
        self._injected.forget(uid)
        for refused in self._refused.values():
            refused.pop(uid, None)
        for backoff in self._backoff.values():
            backoff.pop(uid, None)

    def send(self, key: ObjectKey, injections: Sequence[Injection]) -> None:
        """Mark each pod as holding its container and send the PATCHes."""
        for injection in injections:
            self._mark(injection, add=True)
            future = _send(self._kube, injection)
            future.add_done_callback(functools.partial(self._done, key, injection))

    def _mark(self, injection: Injection, *, add: bool) -> None:
        if injection.copy is not None:  # the copy's record stands for it until the watch's
            meta = injection.copy
            if add:
                self._pods.apply("ADDED", placeholder(meta, injection.container))
            elif (cached := self._pods.get(meta["namespace"], meta["name"])) and not cached[
                "metadata"
            ].get("uid"):  # never created
                self._pods.apply("DELETED", cached)
            return
        if add:
            self._injected.add(injection.pod_uid, injection.container)
        else:
            self._injected.discard(injection.pod_uid, injection.container["name"])
        meta = injection.pod["metadata"]
        cached = self._pods.get(meta["namespace"], injection.pod_name)
        if cached is None or cached["metadata"].get("uid") != injection.pod_uid:
            return
        if not add:
            cached = without_container(cached, injection.container["name"])
        self._pods.apply("MODIFIED", self._injected.fill(cached))

    def _done(self, key: ObjectKey, injection: Injection, future: asyncio.Future[JSON]) -> None:
        if future.cancelled() or isinstance(future.exception(), WriteFenced):
            return  # shutting down, or no longer leading: the PATCH was never sent
        error = future.exception()
        uid, container = injection.pod_uid, injection.container["name"]
        name = f"{injection.pod['metadata']['namespace']}/{injection.pod_name}"
        if error is None:
            self._backoff.get(key, {}).pop(uid, None)
            # A copy's record (mode Copy) stays in the cache until the watch brings the pod.
            if injection.copy is not None:
                log.info("created copy %s of pod %s", injection.copy_name, name)
            else:
                log.info("added ephemeral container %s to pod %s", container, name)
            self._on_result(key, InjectionResult(injection))
            return
        self._mark(injection, add=False)
        if isinstance(error, ApiException) and error.status not in RETRYABLE and error.status < 500:
            message = api_message(error)
            log.warning("adding %s to pod %s was refused: %s", container, name, message)
            failure = Failure(
                injection.pod_name,
                uid,
                container,
                message,
                attempts=injection.attempt,
                last_attempt=self._now(),
            )
            self._refused.setdefault(key, {})[uid] = failure
            self._on_result(key, InjectionResult(injection, failure=failure))
            return
        backoff = self._backoff.setdefault(key, {})
        failures = backoff.get(uid, (0.0, 0))[1] + 1
        delay = min(RETRY_AFTER * 2 ** (failures - 1), MAX_RETRY_AFTER)
        backoff[uid] = (self._clock() + delay, failures)
        reason = api_message(error) if isinstance(error, ApiException) else repr(error)
        log.warning(
            "adding %s to pod %s failed (retry in %.0f s): %s", container, name, delay, reason
        )
        self._on_result(key, InjectionResult(injection, retry_after=delay))


def without_container(record: JSON, name: str) -> JSON:
    """``record`` without the ephemeral container ``name``."""
    spec = record.get("spec") or {}
    kept = [c for c in spec.get("ephemeralContainers") or () if c.get("name") != name]
    return {**record, "spec": {**spec, "ephemeralContainers": kept}}


async def write_status(
    kube: KubeApi,
    pacer: StatusPacer,
    key: ObjectKey,
    patch: JSON | None,
    *,
    on_status: Callable[[JSON], None] | None = None,
) -> float | None:
    """Write the status ``patch`` of PodDebugger ``key`` if ``pacer`` allows; else return the
    seconds after which to try again (None: written, or nothing to write). The API server's
    answer goes to ``on_status``."""
    if patch is None:
        return None
    delay = pacer.delay(key)
    if delay > 0:
        return delay
    try:
        answer = await kube.patch(
            resource_path(API_VERSION, PLURAL, *key, "status"), {"status": patch}
        )
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile
            raise
    else:
        if on_status is not None:
            on_status(answer)
    pacer.wrote(key)
    return None
