"""Helpers for the ConfigMapSync e2e tests: CRD, operator process, namespaces, object access.

Isolation on a shared cluster: every test run picks a run id; its namespaces are
``cms-<run>-<suffix>`` from a fixed list, the operator serves exactly those (``--namespace``)
and its User-Agent carries ``cms-e2e-<run>`` (POD_NAME), so concurrent runs, `make run` and
other suites never see or count each other's objects and requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import ROOT, Cluster, audit_events, condition, wait_observed, wait_until
from e2e.operators import OperatorHandle, OperatorProcess, operator_env, operator_handle

GROUP, VERSION, PLURAL = "sync.opsuite.dev", "v1alpha1", "configmapsyncs"
CRD_DIR = ROOT / "charts" / "configmapsync-operator" / "crds"
OWNER_LABEL = "sync.opsuite.dev/owner-uid"
OWNER_ANNOTATION = "sync.opsuite.dev/owner"
SOURCE_ANNOTATION = "sync.opsuite.dev/source"
FINALIZER = "sync.opsuite.dev/copies"
ALLOWED = "sync.opsuite.dev/allowed-namespaces"
"""The source's consent: where copies may go."""
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def install_crd(cluster: Cluster) -> None:
    """Apply the generated ConfigMapSync CRD and wait until it is served."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}")


class Pool:
    """The namespaces of one test run: ``name("a")`` is ``cms-<run>-a``."""

    SUFFIXES = ("src", "a", "b", "c", "sel-1", "sel-2", "sel-3", "late", "big", "quiet", "gone")
    CREATED_UP_FRONT = ("src", "a", "b", "c", "sel-1", "sel-2", "big", "quiet")

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:6]
        self.identity = f"cms-e2e-{self.run}"
        self.label = f"cms-e2e-{self.run}"
        """A label key only this run's namespaces carry (for selectors)."""

    def name(self, suffix: str) -> str:
        assert suffix in self.SUFFIXES, suffix
        return f"cms-{self.run}-{suffix}"

    def all(self) -> list[str]:
        return [self.name(s) for s in self.SUFFIXES]


def start_operator(cluster: Cluster, pool: Pool, log_dir: Path, *extra: str) -> OperatorProcess:
    """A configmapsync-operator serving exactly the pool's namespaces."""
    log = log_dir / f"configmapsync-operator-{uuid.uuid4().hex[:6]}.log"
    return OperatorProcess(
        "configmapsync-operator",
        [*(f"--namespace={ns}" for ns in pool.all()), *extra],
        log,
        operator_env(cluster, "configmapsync-operator", POD_NAME=pool.identity),
    ).start()


def pool_operator(cluster: Cluster, pool: Pool, log_dir: Path) -> OperatorHandle:
    """The configmapsync-operator for the pool's tests: a ready process serving exactly the pool's
    namespaces, or the one in the cluster (e2e.operators)."""
    return operator_handle(
        cluster, "configmapsync-operator", lambda: start_operator(cluster, pool, log_dir)
    )


def sync_manifest(name: str, config_map: str, **spec: Any) -> dict[str, Any]:
    """A ConfigMapSync manifest; ``spec`` keys are the API's camelCase fields."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigMapSync",
        "metadata": {"name": name},
        "spec": {"configMapName": config_map, **spec},
    }


class Syncs:
    """ConfigMapSync and ConfigMap access; remembers the syncs it created for clean-up."""

    def __init__(self, api: client.ApiClient, cluster: Cluster | None = None) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.cluster = cluster
        """Given: the CRD is re-applied when the cluster's turns out older than this tree's."""
        self.created: list[tuple[str, str]] = []

    # --- ConfigMapSyncs ---------------------------------------------------------------------

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a ConfigMapSync. On a shared cluster another checkout may have applied an
        older CRD meanwhile, whose schema prunes this tree's newer fields: then apply ours
        again, and create again."""
        for _ in range(5):
            result: dict[str, Any] = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, body
            )
            self.created.append((namespace, body["metadata"]["name"]))
            if self.cluster is None or result["spec"].keys() >= body["spec"].keys():
                return result
            self.delete(namespace, body["metadata"]["name"])
            install_crd(self.cluster)
        raise AssertionError(f"the cluster's CRD keeps pruning {body['spec']}")

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
        return result

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, patch
        )
        return result

    def delete(self, namespace: str, name: str, *, wait: bool = True) -> None:
        """Delete a ConfigMapSync; with ``wait``, until it is gone."""
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        if wait:
            wait_until(
                lambda: self.exists(namespace, name),
                lambda present: not present,
                timeout=60,
                what=f"ConfigMapSync {namespace}/{name} gone",
            )

    def exists(self, namespace: str, name: str) -> bool:
        try:
            self.get(namespace, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait(
        self,
        namespace: str,
        name: str,
        done: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """Wait until the sync satisfies ``done`` with a status of its current generation."""
        return wait_observed(
            lambda: self.get(namespace, name), done, what=f"{name}: {what}", timeout=timeout
        )

    def wait_ready(self, namespace: str, name: str, synced: int, timeout: float = 60) -> Any:
        """Wait for Ready=True with ``synced`` destinations in sync."""
        return self.wait(
            namespace,
            name,
            lambda o: (
                condition(o, "Ready").get("status") == "True"
                and o["status"].get("syncedNamespaces") == synced
            ),
            f"Ready with {synced} synced",
            timeout,
        )

    def cleanup(self) -> None:
        for namespace, name in reversed(self.created):
            self.delete(namespace, name, wait=False)
        for namespace, name in self.created:
            self.delete(namespace, name, wait=True)

    # --- ConfigMaps ---------------------------------------------------------------------

    def put_configmap(
        self,
        namespace: str,
        name: str,
        data: dict[str, str] | None = None,
        *,
        binary: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        immutable: bool | None = None,
    ) -> client.V1ConfigMap:
        """Create a ConfigMap, or replace the one there."""
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=name, labels=labels or None, annotations=annotations or None
            ),
            data=data,
            binary_data=binary,
            immutable=immutable,
        )
        try:
            return self.core.create_namespaced_config_map(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        return self.core.replace_namespaced_config_map(name, namespace, body)

    def put_source(
        self,
        namespace: str,
        name: str,
        data: dict[str, str] | None = None,
        *,
        allowed: str = "*",
        annotations: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> client.V1ConfigMap:
        """A source ConfigMap that allows copies in the namespaces ``allowed`` names."""
        return self.put_configmap(
            namespace, name, data, annotations={ALLOWED: allowed, **(annotations or {})}, **kwargs
        )

    def configmap(self, namespace: str, name: str) -> client.V1ConfigMap | None:
        try:
            return self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def wait_copies(
        self,
        namespaces: Iterable[str],
        name: str,
        done: Callable[[client.V1ConfigMap | None], bool],
        what: str,
        timeout: float = 60,
    ) -> dict[str, client.V1ConfigMap | None]:
        """Wait until the ConfigMap ``name`` in every one of ``namespaces`` satisfies ``done``."""
        spaces = list(namespaces)
        return wait_until(
            lambda: {ns: self.configmap(ns, name) for ns in spaces},
            lambda found: all(done(cm) for cm in found.values()),
            timeout=timeout,
            what=f"{name} in {', '.join(spaces)}: {what}",
        )


def has_data(data: dict[str, str]) -> Callable[[client.V1ConfigMap | None], bool]:
    """A copy predicate: present with exactly ``data``."""
    return lambda cm: cm is not None and (cm.data or {}) == data


def owned_by(uid: str) -> Callable[[client.V1ConfigMap | None], bool]:
    """A copy predicate: present and marked as owned by the sync ``uid``."""
    return lambda cm: cm is not None and (cm.metadata.labels or {}).get(OWNER_LABEL) == uid


def writes_by(audit_log: Path, identity: str, since: float, until: float) -> list[dict[str, Any]]:
    """Write requests in the audit log whose User-Agent names ``identity``, in [since, until]."""

    def stamp(event: dict[str, Any]) -> float:
        return datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()

    return [
        e
        for e in audit_events(audit_log)
        if e.get("verb") in WRITE_VERBS
        and e.get("stage") == "ResponseComplete"
        and identity in e.get("userAgent", "")
        and since <= stamp(e) <= until
    ]


def describe(events: list[dict[str, Any]]) -> str:
    """One line per audit event, for assertion messages."""
    return "\n".join(
        f"{e.get('requestReceivedTimestamp')} {e.get('verb')} {e.get('requestURI')} "
        f"-> {e.get('responseStatus', {}).get('code')}"
        for e in events[:20]
    )


def metric_value(text: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The value of the sample ``name`` with ``labels`` in an exposition ``text`` (0 if absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(
                sample.labels.get(k) == v for k, v in (labels or {}).items()
            ):
                return float(sample.value)
    return 0.0
