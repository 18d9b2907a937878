"""Helpers for the PodSet e2e tests: CRD install, operator process, object access."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Self

from kubernetes import client, watch

from e2e.cluster import ROOT, Cluster, condition, wait_until
from e2e.operators import OperatorHandle, OperatorProcess, operator_handle, start_operator
from e2e.resources import CustomResource

GROUP, VERSION, PLURAL = "apps.opsuite.dev", "v1alpha1", "podsets"
CRD_DIR = ROOT / "charts" / "podset-operator" / "crds"


RESOURCE = CustomResource(GROUP, VERSION, "PodSet", PLURAL, CRD_DIR)
install_crd = RESOURCE.install_crd


def start_podset_operator(
    cluster: Cluster, namespace: str, log_dir: Path, *extra: str
) -> OperatorProcess:
    """A podset-operator serving only ``namespace``."""
    return start_operator(cluster, "podset-operator", [namespace], log_dir, *extra)


def podset_operator(cluster: Cluster, namespace: str, log_dir: Path) -> OperatorHandle:
    """The podset-operator for a test in ``namespace``: a ready process serving only it, or the
    one in the cluster (e2e.operators)."""
    return operator_handle(
        cluster, "podset-operator", lambda: start_podset_operator(cluster, namespace, log_dir)
    )


def podset(
    name: str, replicas: int, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A PodSet manifest running busybox sleepers."""
    labels = labels or {"app": name}
    return RESOURCE.manifest(
        name,
        {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
                    ]
                },
            },
            **spec,
        },
    )


class PodSets:
    """PodSet access for one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, body
        )
        return result

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name
        )
        return result

    def patch(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, patch
        )
        return result

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, propagation_policy="Background"
        )

    def pods(self, label_selector: str) -> list[client.V1Pod]:
        items: list[client.V1Pod] = self.core.list_namespaced_pod(
            self.namespace, label_selector=label_selector
        ).items
        return items

    def active_pods(self, label_selector: str) -> list[client.V1Pod]:
        return [
            p
            for p in self.pods(label_selector)
            if p.metadata.deletion_timestamp is None
            and p.status.phase not in ("Succeeded", "Failed")
        ]

    def wait_running(
        self, label_selector: str, count: int, timeout: float = 90
    ) -> list[client.V1Pod]:
        """Wait until exactly ``count`` active pods are Running (and no more exist)."""

        def probe() -> list[client.V1Pod]:
            return self.active_pods(label_selector)

        return wait_until(
            probe,
            lambda pods: len(pods) == count and all(p.status.phase == "Running" for p in pods),
            timeout=timeout,
            what=f"{count} Running pods matching {label_selector}",
        )

    def wait_status(self, name: str, timeout: float = 60, **expected: Any) -> dict[str, Any]:
        """Wait until the PodSet's status has the expected fields and is observed-current."""

        def done(ps: dict[str, Any]) -> bool:
            status = ps.get("status", {})
            current = status.get("observedGeneration") == ps["metadata"]["generation"]
            return current and all(status.get(k) == v for k, v in expected.items())

        return wait_until(lambda: self.get(name), done, timeout=timeout, what=f"status {expected}")


def is_active(pod: client.V1Pod) -> bool:
    """Not being deleted and not terminated (the pods a PodSet counts)."""
    return pod.metadata.deletion_timestamp is None and pod.status.phase not in (
        "Succeeded",
        "Failed",
    )


class BackgroundWatch:
    """A watch run in a thread for the length of a ``with`` block: entering waits for its first
    event (``events`` counts them); leaving stops the watch and the thread. Subclasses run the
    watch in ``_run``, keeping ``_watch`` current and stopping when ``_stop`` is set."""

    def __init__(self, thread_name: str, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self.events = 0

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        wait_until(lambda: self.events, lambda n: n > 0, timeout=30, what=self._what)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(timeout=60)


class PodCounter(BackgroundWatch):
    """Follows a namespace's pods through a watch (in a thread): how many now, how many at most,
    and how few of them were Ready at least.

    Every event is counted in the order the API server sent it, so a count that held for a
    moment only is seen too. A watch that times out resumes from the last resourceVersion seen
    (no gap); one that fails or expires lists again, so an API server pause only leaves a gap;
    the counts are those of the pods the watch reported.
    """

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        super().__init__(f"pods-{namespace}", "the pod watch")
        self._pods: dict[str, tuple[bool, bool]] = {}  # uid -> (active, ready)
        self.highest_active = 0
        self.highest_total = 0
        self.lowest_ready = 0
        self.relists = 0

    @property
    def active(self) -> int:
        with self._lock:
            return self._active()

    @property
    def ready(self) -> int:
        """Active pods whose Ready condition is True."""
        with self._lock:
            return self._ready()

    @property
    def total(self) -> int:
        with self._lock:
            return len(self._pods)

    def reset_highest(self) -> None:
        with self._lock:
            self.highest_active = self._active()
            self.highest_total = len(self._pods)

    def reset_lowest(self) -> None:
        """From now on, ``lowest_ready`` is the fewest Ready pods seen since this call."""
        with self._lock:
            self.lowest_ready = self._ready()

    def _active(self) -> int:
        return sum(active for active, _ in self._pods.values())

    def _ready(self) -> int:
        return sum(active and ready for active, ready in self._pods.values())

    def _update(self, uid: str, state: tuple[bool, bool] | None) -> None:
        with self._lock:
            if state is None:
                self._pods.pop(uid, None)
            else:
                self._pods[uid] = state
            self.highest_active = max(self.highest_active, self._active())
            self.highest_total = max(self.highest_total, len(self._pods))
            self.lowest_ready = min(self.lowest_ready, self._ready())
            self.events += 1

    def _run(self) -> None:
        version: str | None = None  # where the watch resumes; None: list first
        while not self._stop.is_set():
            try:
                if version is None:
                    response = self.core.list_namespaced_pod(self.namespace, _preload_content=False)
                    listing = json.loads(response.data)
                    with self._lock:
                        self._pods = {p["metadata"]["uid"]: _raw_state(p) for p in listing["items"]}
                    self._update("", None)  # recompute the extreme counts
                    self.relists += 1
                    version = listing["metadata"]["resourceVersion"]
                self._watch = watch.Watch()
                for event in self._watch.stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=30,
                    _request_timeout=45,
                    deserialize=False,  # plain dicts: a few hundred pods a second, cheaply
                ):
                    if event["type"] == "ERROR":
                        version = None  # 410 Gone: list again
                        break
                    pod = event["object"]
                    version = pod["metadata"]["resourceVersion"]
                    gone = event["type"] == "DELETED"
                    if event["type"] != "BOOKMARK":
                        self._update(pod["metadata"]["uid"], None if gone else _raw_state(pod))
                    if self._stop.is_set():
                        return
            except Exception:  # a pause, a timeout, an expired version: list again
                version = None
                time.sleep(0.2)


def _raw_active(pod: dict[str, Any]) -> bool:
    """``is_active`` for a pod as a plain dict."""
    return "deletionTimestamp" not in pod["metadata"] and pod.get("status", {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


def _raw_state(pod: dict[str, Any]) -> tuple[bool, bool]:
    """(active, Ready condition True) of a pod as a plain dict."""
    conditions = pod.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return _raw_active(pod), ready


class ConditionHistory(BackgroundWatch):
    """Follows one PodSet through a watch (in a thread) and records each (status, reason) its
    condition of ``type_`` takes, in order, so that a state held for a moment only is seen too.

    A watch that ends resumes from the last resourceVersion seen; one that fails lists again
    (what changed in between is then seen as its last state only).
    """

    def __init__(
        self, api: client.ApiClient, namespace: str, name: str, type_: str = "Progressing"
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace, self.name, self.type = namespace, name, type_
        super().__init__(f"pset-{name}", "the PodSet watch")
        self._seen: list[tuple[str, str]] = []

    @property
    def seen(self) -> list[tuple[str, str]]:
        """The (status, reason) states in order, consecutive repeats folded."""
        with self._lock:
            return list(self._seen)

    def _record(self, obj: dict[str, Any]) -> None:
        found = condition(obj, self.type)
        state = (found.get("status", ""), found.get("reason", ""))
        with self._lock:
            if found and (not self._seen or self._seen[-1] != state):
                self._seen.append(state)
            self.events += 1

    def _run(self) -> None:
        version: str | None = None
        selector = f"metadata.name={self.name}"
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = self.custom.list_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL, field_selector=selector
                    )
                    for obj in listing["items"]:
                        self._record(obj)
                    if not listing["items"]:
                        with self._lock:
                            self.events += 1
                    version = listing["metadata"]["resourceVersion"]
                self._watch = watch.Watch()
                for event in self._watch.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    field_selector=selector,
                    resource_version=version,
                    timeout_seconds=30,
                    _request_timeout=45,
                ):
                    if event["type"] == "ERROR":
                        version = None
                        break
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._record(obj)
                    if self._stop.is_set():
                        return
            except Exception:  # a pause, a timeout, an expired version: list again
                version = None
                time.sleep(0.2)


def podset_events(api: client.ApiClient, namespace: str, name: str) -> list[client.CoreV1Event]:
    """The core/v1 Events about the PodSet ``name``."""
    items: list[client.CoreV1Event] = (
        client.CoreV1Api(api)
        .list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.kind=PodSet,involvedObject.name={name}",
        )
        .items
    )
    return items
