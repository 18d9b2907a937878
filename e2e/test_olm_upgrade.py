"""OLM upgrades the operators along the catalog's upgrade graph, and nothing they manage notices.

Run by ``hack/e2e-olm.sh upgrade`` (``make e2e-olm``) after ``subscribe`` installed the previous
release (hack/olm_images.py: the current bundles re-versioned lower, each CRD without one
optional field) from a CatalogSource polling a moving catalog tag. The test creates a PodSet, a
ConfigMapSync and a PodDebugger with their pods and copies, then moves the tag to the catalog of
both releases (published beside it), and shows that:

- each Subscription upgrades by itself (installedCSV the current CSV, Succeeded; the previous
  CSV gone), timed from the tag move to the new CSVs' Succeeded, to the Subscriptions' status
  and to Ready operator pods (the Subscription's config.env applied, which OLM does once the
  Subscription names the new CSV);
- the custom resources survive and keep being reconciled: a spec change using the field the
  previous CRD lacked takes effect;
- no copy, pod or ephemeral container is lost or duplicated (same UIDs, same counts, one debug
  container per pod).

The CRs live in the operators' namespace (E2E_NAMESPACE), which every install mode serves, and
the copies in two namespaces next to it (which an OperatorGroup that does not serve all
namespaces must list).
"""

from __future__ import annotations

import json
import os
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.cluster import ROOT, Cluster, condition, wait_until
from e2e.placement import BUSYBOX, real_pod_spec
from opsuite_packaging.operators import OPERATORS
from opsuite_packaging.previous_release import PREVIOUS_VERSION

sys.path.insert(0, str(ROOT / "hack"))
import oci_push
import olm_images

PUBLISHED = os.environ.get("E2E_OLM_UPGRADE", "")
"""The names hack/olm_images.py published (its JSON output); the test runs only when set."""
pytestmark = pytest.mark.skipif(
    not PUBLISHED, reason="run by `hack/e2e-olm.sh upgrade` (E2E_OLM_UPGRADE), after subscribe"
)

NAMESPACE = os.environ.get("E2E_NAMESPACE", "operators")
PACKAGES = tuple(op.image for op in OPERATORS)
CURRENT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
OLM = ("operators.coreos.com", "v1alpha1")
PODSET = ("apps.opsuite.dev", "v1alpha1", "podsets")
SYNC = ("sync.opsuite.dev", "v1alpha1", "configmapsyncs")
DEBUGGER = ("debug.opsuite.dev", "v1alpha1", "poddebuggers")
NAME = "olm-upgrade"
TARGETS = {"app": f"{NAME}-target"}
ALLOWED = "sync.opsuite.dev/allowed-namespaces"
"""The source ConfigMap's annotation naming the namespaces it may be copied into."""


def _csv(package: str, version: str) -> str:
    return f"{package}.v{version}"


class Objects:
    """The custom resources and the objects they manage, read through the API."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def get(self, kind: tuple[str, str, str], name: str = NAME) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *kind[:2], NAMESPACE, kind[2], name
        )
        return obj

    def create(self, kind: tuple[str, str, str], body: dict[str, Any]) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.create_namespaced_custom_object(
            *kind[:2], NAMESPACE, kind[2], body
        )
        return obj

    def patch(self, kind: tuple[str, str, str], spec: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            *kind[:2], NAMESPACE, kind[2], NAME, {"spec": spec}
        )

    def ready(
        self, kind: tuple[str, str, str], what: str, debugged: int | None = None
    ) -> dict[str, Any]:
        """Wait until the object is Ready with a status of its current generation (and, for the
        PodDebugger, ``debugged`` pods holding its container)."""

        def current(obj: dict[str, Any]) -> bool:
            status = obj.get("status", {})
            return (
                status.get("observedGeneration") == obj["metadata"]["generation"]
                and condition(obj, "Ready").get("status") == "True"
                and (debugged is None or status.get("debuggedCount") == debugged)
            )

        return wait_until(lambda: self.get(kind), current, timeout=120, what=what)

    def podset_pods(self) -> dict[str, str]:
        """The PodSet's active pods: name -> uid."""
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={NAME}").items
        return {
            p.metadata.name: p.metadata.uid
            for p in pods
            if p.metadata.deletion_timestamp is None and p.status.phase in ("Pending", "Running")
        }

    def copies(self, destinations: list[str]) -> dict[str, client.V1ConfigMap]:
        """The ConfigMapSync's copies by namespace (absent ones left out)."""
        found = {}
        for namespace in destinations:
            try:
                found[namespace] = self.core.read_namespaced_config_map(NAME, namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        return found

    def debug_containers(self) -> dict[str, list[str]]:
        """The PodDebugger's target pods: name -> their ephemeral containers' names."""
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={TARGETS['app']}")
        return {
            p.metadata.name: [c.name for c in p.spec.ephemeral_containers or []] for p in pods.items
        }

    def target_uids(self) -> dict[str, str]:
        pods = self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={TARGETS['app']}")
        return {p.metadata.name: p.metadata.uid for p in pods.items}

    def run_target(self, name: str) -> None:
        """A pod the PodDebugger selects, really running on the real node."""
        body = {
            "metadata": {"name": name, "labels": TARGETS},
            "spec": real_pod_spec(self.core.api_client),
        }
        self.core.create_namespaced_pod(NAMESPACE, body)
        wait_until(
            lambda: self.core.read_namespaced_pod(name, NAMESPACE).status.phase,
            lambda phase: phase == "Running",
            timeout=120,
            what=f"pod {name} Running",
        )


class Olm:
    """The Subscriptions, CSVs and Deployments of the operators OLM installed."""

    def __init__(self, cluster: Cluster, api: client.ApiClient) -> None:
        self.cluster = cluster
        self.custom = client.CustomObjectsApi(api)
        self.apps = client.AppsV1Api(api)

    def subscription(self, package: str) -> dict[str, Any]:
        sub: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *OLM, NAMESPACE, "subscriptions", package
        )
        return sub

    def installed(self, package: str) -> str:
        return str(self.subscription(package).get("status", {}).get("installedCSV", ""))

    def phase(self, csv: str) -> str | None:
        try:
            obj = self.custom.get_namespaced_custom_object(
                *OLM, NAMESPACE, "clusterserviceversions", csv
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return str(obj.get("status", {}).get("phase", ""))

    def rolled_out(self, package: str, version: str) -> bool:
        """The Deployment runs ``version`` only, as the Subscription configures it (its
        ``config.env``), every replica updated and ready."""
        deployment = self.apps.read_namespaced_deployment(package, NAMESPACE)
        labels = deployment.spec.template.metadata.labels or {}
        env = {(v.name, v.value) for v in deployment.spec.template.spec.containers[0].env or []}
        config = self.subscription(package)["spec"].get("config", {}).get("env", [])
        status = deployment.status
        return (
            labels.get("app.kubernetes.io/version") == version
            and {(v["name"], v.get("value")) for v in config} <= env
            and status.observed_generation == deployment.metadata.generation
            and status.updated_replicas == deployment.spec.replicas
            and status.ready_replicas == deployment.spec.replicas
            and status.replicas == deployment.spec.replicas
        )


def _publish_catalog_of_both_releases() -> None:
    """Move the catalog's tag to the catalog of both releases, as a release does."""
    published = json.loads(Path(PUBLISHED).read_text())
    oci_push.retag(published["catalog/next"], olm_images.UPGRADE_TAG)


def _crd_fields(cluster: Cluster, crd: str) -> set[str]:
    obj = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json"))
    (version,) = obj["spec"]["versions"]
    return set(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


@pytest.fixture
def destinations(api: client.ApiClient) -> Iterator[list[str]]:
    """The copies' namespaces, ``<E2E_NAMESPACE>-copy-a`` and ``-b``: created (and deleted
    afterwards) when absent, as with an AllNamespaces OperatorGroup; an OperatorGroup serving
    only some namespaces must list them, and they are left as they are."""
    core = client.CoreV1Api(api)
    names = [f"{NAMESPACE}-copy-{suffix}" for suffix in ("a", "b")]
    created = []
    for name in names:
        try:
            accept = {"sync.opsuite.dev/accept-from": NAMESPACE}
            meta = client.V1ObjectMeta(name=name, annotations=accept)
            core.create_namespace(client.V1Namespace(metadata=meta))
            created.append(name)
        except ApiException as exc:
            if exc.status != 409:
                raise
    yield names
    for name in created:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def objects(api: client.ApiClient, destinations: list[str]) -> Iterator[Objects]:
    """Access to the test's objects in the operators' namespace, deleted afterwards."""
    objects = Objects(api)
    yield objects
    for kind in (PODSET, SYNC, DEBUGGER):
        try:
            objects.custom.delete_namespaced_custom_object(*kind[:2], NAMESPACE, kind[2], NAME)
        except ApiException as exc:
            if exc.status != 404:
                raise
    objects.core.delete_collection_namespaced_pod(NAMESPACE, label_selector=f"app={TARGETS['app']}")
    objects.core.delete_namespaced_config_map(NAME, NAMESPACE)


def test_subscriptions_upgrade_and_every_managed_object_survives(
    cluster: Cluster, api: client.ApiClient, objects: Objects, destinations: list[str]
) -> None:
    olm = Olm(cluster, api)
    for package in PACKAGES:
        assert olm.installed(package) == _csv(package, PREVIOUS_VERSION)
        assert olm.phase(_csv(package, PREVIOUS_VERSION)) == "Succeeded"

    # --- the previous release at work --------------------------------------------------------
    objects.core.create_namespaced_config_map(
        NAMESPACE,
        {
            "metadata": {
                "name": NAME,
                "annotations": {ALLOWED: f"{NAMESPACE}-copy-*", "team": "olm"},
            },
            "data": {"k": "v"},
        },
    )
    # The previous CRD has no copyAnnotations: the API server prunes it.
    sync = objects.create(
        SYNC,
        {
            "apiVersion": "/".join(SYNC[:2]),
            "kind": "ConfigMapSync",
            "metadata": {"name": NAME},
            "spec": {
                "configMapName": NAME,
                "destinationNamespaces": destinations,
                "copyAnnotations": ["team"],
            },
        },
    )
    assert "copyAnnotations" not in sync["spec"], "the previous release's CRD is not installed"
    podset = {
        "apiVersion": "/".join(PODSET[:2]),
        "kind": "PodSet",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": real_pod_spec(api),
            },
        },
    }
    objects.create(PODSET, podset)
    for name in ("target-1", "target-2"):
        objects.run_target(name)
    objects.create(
        DEBUGGER,
        {
            "apiVersion": "/".join(DEBUGGER[:2]),
            "kind": "PodDebugger",
            "metadata": {"name": NAME},
            "spec": {
                "selector": {"matchLabels": TARGETS},
                "image": BUSYBOX,
                "command": ["sleep", "3600"],
            },
        },
    )
    objects.ready(SYNC, "the ConfigMapSync Ready")
    objects.ready(PODSET, "the PodSet Ready")
    objects.ready(DEBUGGER, "the PodDebugger Ready, both target pods debugged", debugged=2)
    pods = objects.podset_pods()
    copies = {ns: cm.metadata.uid for ns, cm in objects.copies(destinations).items()}
    debug = objects.debug_containers()
    targets = objects.target_uids()
    assert len(pods) == 2
    assert sorted(copies) == destinations
    assert all(len(names) == 1 for names in debug.values()), debug

    # --- the catalog of both releases under the same tag: OLM upgrades -----------------------
    started = time.monotonic()
    _publish_catalog_of_both_releases()
    succeeded: dict[str, float] = {}
    upgraded: dict[str, float] = {}
    ready: dict[str, float] = {}

    def progress() -> bool:
        now = time.monotonic() - started
        for package in PACKAGES:
            csv = _csv(package, CURRENT)
            if package not in succeeded and olm.phase(csv) == "Succeeded":
                succeeded[package] = now
            if package not in upgraded and olm.installed(package) == csv:
                upgraded[package] = now
            if (
                package in succeeded
                and package in upgraded
                and package not in ready
                and olm.rolled_out(package, CURRENT)
            ):
                ready[package] = now
        return len(ready) == len(PACKAGES)

    wait_until(progress, bool, timeout=600, interval=1, what="every Subscription upgraded")
    for what, times in (
        ("the new CSVs Succeeded", succeeded),
        ("the Subscriptions' installedCSV the new CSVs", upgraded),
        ("the new operator pods Ready, as the Subscriptions configure them", ready),
    ):
        each = ", ".join(f"{p} {t:.0f} s" for p, t in times.items())
        print(f"\n>> catalog published to {what}: {max(times.values()):.0f} s ({each})")
    for package in PACKAGES:
        wait_until(
            lambda package=package: olm.phase(_csv(package, PREVIOUS_VERSION)),
            lambda phase: phase is None,
            timeout=120,
            what=f"the previous CSV of {package} gone",
        )
    assert "copyAnnotations" in _crd_fields(cluster, "configmapsyncs.sync.opsuite.dev")
    assert "updateStrategy" in _crd_fields(cluster, "podsets.apps.opsuite.dev")
    assert "maxPods" in _crd_fields(cluster, "poddebuggers.debug.opsuite.dev")

    # --- nothing lost or duplicated across the upgrade ---------------------------------------
    assert objects.podset_pods() == pods
    assert {ns: cm.metadata.uid for ns, cm in objects.copies(destinations).items()} == copies
    assert objects.debug_containers() == debug
    assert objects.target_uids() == targets

    # --- the new operators reconcile the new fields ------------------------------------------
    objects.patch(SYNC, {"copyAnnotations": ["team"]})
    wait_until(
        lambda: objects.copies(destinations),
        lambda found: (
            all((cm.metadata.annotations or {}).get("team") == "olm" for cm in found.values())
            and len(found) == 2
        ),
        timeout=120,
        what="the copies annotated as their source",
    )
    objects.ready(SYNC, "the ConfigMapSync Ready after the change")
    objects.patch(PODSET, {"replicas": 3, "updateStrategy": {"type": "OnDelete"}})
    objects.ready(PODSET, "the PodSet Ready with 3 replicas")
    wait_until(objects.podset_pods, lambda found: len(found) == 3, timeout=120, what="3 pods")
    assert objects.get(PODSET)["spec"]["updateStrategy"]["type"] == "OnDelete"
    objects.patch(DEBUGGER, {"maxPods": 3})
    objects.run_target("target-3")
    objects.ready(DEBUGGER, "the PodDebugger Ready, the third target pod debugged", debugged=3)

    after = objects.podset_pods()
    assert set(pods.items()) <= set(after.items()), (pods, after)
    assert {ns: cm.metadata.uid for ns, cm in objects.copies(destinations).items()} == copies
    containers = objects.debug_containers()
    assert {name: containers[name] for name in debug} == debug
    assert all(len(names) == 1 for names in containers.values()), containers
