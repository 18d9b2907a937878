"""Helpers for the ConfigMapSync e2e tests: CRD, operator process, namespaces, object access.

Isolation on a shared cluster: every test run picks a run id; its namespaces are
``cms-<run>-<suffix>`` from a fixed list, the operator serves exactly those (``--namespace``)
and its User-Agent carries ``cms-e2e-<run>`` (POD_NAME), so concurrent runs, `make run` and
other suites never see or count each other's objects and requests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import ROOT, WRITE_VERBS, Cluster, audit_events, wait_until
from e2e.resources import CustomObjects, CustomResource, NamespacePool

GROUP, VERSION, PLURAL = "sync.opsuite.dev", "v1alpha1", "configmapsyncs"
CRD_DIR = ROOT / "charts" / "configmapsync-operator" / "crds"
OWNER_LABEL = "sync.opsuite.dev/owner-uid"
OWNER_ANNOTATION = "sync.opsuite.dev/owner"
SOURCE_ANNOTATION = "sync.opsuite.dev/source"
FINALIZER = "sync.opsuite.dev/copies"
ALLOWED = "sync.opsuite.dev/allowed-namespaces"
"""The source's consent: where copies may go."""
ACCEPT = "sync.opsuite.dev/accept-from"
"""A destination Namespace's consent: the source namespaces it takes copies from."""


RESOURCE = CustomResource(GROUP, VERSION, "ConfigMapSync", PLURAL, CRD_DIR)
install_crd = RESOURCE.install_crd
SECRET_RESOURCE = CustomResource(GROUP, VERSION, "SecretSync", "secretsyncs", CRD_DIR)


class Pool(NamespacePool):
    """The namespaces of one test run: ``name("a")`` is ``cms-<run>-a``."""

    RESOURCE = RESOURCE
    PREFIX = "cms"
    SUFFIXES = ("src", "a", "b", "c", "sel-1", "sel-2", "sel-3", "late", "big", "quiet", "gone")
    CREATED_UP_FRONT = ("src", "a", "b", "c", "sel-1", "sel-2", "big", "quiet")
    COMMAND = "configmapsync-operator"

    def __init__(self, cluster: Cluster, api: client.ApiClient) -> None:
        super().__init__(cluster, api)
        self.label = f"cms-e2e-{self.run}"
        """A label key only this run's namespaces carry (for selectors)."""

    def annotations(self) -> dict[str, str]:
        """Every namespace of the run takes copies from the run's namespaces."""
        return {ACCEPT: f"{self.PREFIX}-{self.run}-*"}


DOC = ROOT / "docs" / "configmapsync.md"


def doc_examples(section: str) -> list[dict[str, Any]]:
    """The YAML examples under the heading ``## section`` of docs/configmapsync.md, in order
    (so that the tests apply what the page shows)."""
    text = DOC.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def sync_manifest(name: str, config_map: str, **spec: Any) -> dict[str, Any]:
    """A ConfigMapSync manifest; ``spec`` keys are the API's camelCase fields."""
    return RESOURCE.manifest(name, {"configMapName": config_map, **spec})


class Syncs(CustomObjects):
    """ConfigMapSync and ConfigMap access; remembers the syncs it created for clean-up."""

    def __init__(self, api: client.ApiClient, cluster: Cluster | None = None) -> None:
        super().__init__(api, RESOURCE)
        self.cluster = cluster
        """Given: the CRD is re-applied when the cluster's turns out older than this tree's."""

    # --- ConfigMapSyncs ---------------------------------------------------------------------

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a ConfigMapSync. On a shared cluster another checkout may have applied an
        older CRD meanwhile, whose schema prunes this tree's newer fields: then apply ours
        again, and create again."""
        for _ in range(5):
            result = super().create(namespace, body)
            if self.cluster is None or result["spec"].keys() >= body["spec"].keys():
                return result
            self.delete(namespace, body["metadata"]["name"], wait=True)
            install_crd(self.cluster)
        raise AssertionError(f"the cluster's CRD keeps pruning {body['spec']}")

    def wait_ready(self, namespace: str, name: str, synced: int, timeout: float = 60) -> Any:
        """Wait for Ready=True with ``synced`` destinations in sync."""
        return self.wait_ready_with(namespace, name, "syncedNamespaces", synced, timeout)

    def cleanup(self, *, wait: bool = True) -> None:
        """Delete every sync created here and wait until all are gone (their finalizers ran)."""
        super().cleanup(wait=wait)

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
