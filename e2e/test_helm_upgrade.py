"""The Helm upgrade from the previous release to this one, across a CRD change, under load.

hack/e2e-in-cluster.sh install-previous installed the previous release of the three charts
(opsuite_packaging/previous_release.py: an older chart version, older CRDs that Helm created);
``upgrade`` runs this module once. It follows the charts' READMEs: first the CRDs, with
``helm show crds <chart> | kubectl apply --server-side --force-conflicts -f -`` (Helm never
upgrades ``crds/``, and the plain server-side apply is refused: Helm's field manager owns the
CRDs' versions), then ``helm upgrade`` (hack/e2e-install.sh, the values the suite uses), which
rolls each operator's pod. Meanwhile a ConfigMapSync's source changes every second, a PodSet
scales and pods for a PodDebugger appear; the operators must keep reconciling through the
handover, lose nothing and duplicate nothing, and the field each new CRD adds must be kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import RELEASE_NAMESPACE, helm
from e2e.cluster import ROOT, Cluster, kubectl_binary, wait_until
from e2e.operators import operators_mode
from e2e.placement import BUSYBOX, real_pod_spec
from opsuite_packaging.previous_release import ADDED_FIELDS, PREVIOUS_VERSION

pytestmark = [
    pytest.mark.helm_upgrade,
    pytest.mark.skipif(
        operators_mode() != "in-cluster",
        reason="upgrades the charts' releases, which run only with E2E_OPERATORS=in-cluster",
    ),
]

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CRD_MANAGER = "opsuite-crds"
"""The field manager the READMEs' CRD command uses."""
DEBUG_LABELS = {"app": "upgrade-debug"}
LOAD_PERIOD = 1.0
"""Seconds between two source changes of the load."""
CATCH_UP = 120.0
"""Seconds a change made during the upgrade may take to be reconciled, handover included (a
pod start on the real node, then the Lease: leaseDuration 15 s)."""


def _run(*command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)


def _release_versions(cluster: Cluster) -> dict[str, str]:
    releases = json.loads(helm(cluster, "list", "--namespace", RELEASE_NAMESPACE, "-o", "json"))
    return {r["name"]: r["chart"].rpartition("-")[2] for r in releases}


def _spec_fields(cluster: Cluster, crd: str) -> set[str]:
    obj = json.loads(cluster.kubectl("get", "crd", crd, "-o", "json"))
    schema = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return set(schema["properties"]["spec"]["properties"])


def _crds_of(cluster: Cluster, chart: str) -> str:
    return helm(cluster, "show", "crds", str(ROOT / "charts" / chart))


def _apply_crds(cluster: Cluster, manifest: str, *flags: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = f"--kubeconfig={cluster.kubeconfig}"
    command = (kubectl_binary(), kubeconfig, "apply", "--server-side", *flags, "-f", "-")
    return _run(*command, stdin=manifest)


def _image(api: client.ApiClient, chart: str) -> str:
    deployment = client.AppsV1Api(api).read_namespaced_deployment(chart, RELEASE_NAMESPACE)
    image: str = deployment.spec.template.spec.containers[0].image
    return image


@dataclass
class Lags:
    """When each load step was made and when the cluster showed it reconciled."""

    made: dict[int, float] = field(default_factory=dict)
    seen: dict[int, float] = field(default_factory=dict)

    def worst(self) -> float:
        return max(self.seen[i] - self.made[i] for i in self.made)


class Load:
    """Changes made while the upgrade runs, and a thread that notes when each is reconciled."""

    def __init__(self, api: client.ApiClient, namespace: str, destinations: list[str]) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.destinations = destinations
        self.copies = Lags()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._guard(self._change), daemon=True),
            threading.Thread(target=self._guard(self._observe), daemon=True),
        ]

    def _guard(self, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # reported by __exit__
                self.errors.append(exc)

        return run

    def _change(self) -> None:
        step = 0
        while not self.stop.is_set():
            step += 1
            self.core.patch_namespaced_config_map(
                "settings", self.namespace, {"data": {"step": str(step)}}
            )
            self.copies.made[step] = time.monotonic()
            self.stop.wait(LOAD_PERIOD)

    def _observe(self) -> None:
        while not self.stop.is_set() or len(self.copies.seen) < len(self.copies.made):
            steps = []
            for ns in self.destinations:
                try:
                    data = self.core.read_namespaced_config_map("settings", ns).data or {}
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    data = {}
                steps.append(int(data.get("step", "0")))
            now, done = time.monotonic(), min(steps)
            for step in [s for s in self.copies.made if s <= done and s not in self.copies.seen]:
                self.copies.seen[step] = now
            if self.copies.made and now - max(self.copies.made.values()) > CATCH_UP:
                raise AssertionError(f"copies stuck at step {done} of {max(self.copies.made)}")
            time.sleep(0.2)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=CATCH_UP + 30)
        if self.errors:
            raise self.errors[0]


@pytest.fixture
def namespaces(api: client.ApiClient) -> Iterator[tuple[str, list[str]]]:
    """A source namespace and three destinations, deleted afterwards."""
    core = client.CoreV1Api(api)
    suffix = f"{int(time.time()) % 100000}"
    source = f"helm-upgrade-{suffix}"
    destinations = [f"{source}-{i}" for i in range(3)]
    for name in (source, *destinations):
        accept = {"sync.opsuite.dev/accept-from": source}
        core.create_namespace({"metadata": {"name": name, "annotations": accept}})
    yield source, destinations
    for name in (source, *destinations):
        core.delete_namespace(name, propagation_policy="Background")


def _custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _podset(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps.opsuite.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "upgrade-web"}},
            "template": {
                "metadata": {"labels": {"app": "upgrade-web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]},
            },
        },
    }


def _active_pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _debug_pod(api: client.ApiClient, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": DEBUG_LABELS},
        "spec": real_pod_spec(api),
    }


def _debug_containers(core: client.CoreV1Api, namespace: str) -> dict[str, list[str]]:
    pods = core.list_namespaced_pod(namespace, label_selector="app=upgrade-debug").items
    return {p.metadata.name: [c.name for c in p.spec.ephemeral_containers or []] for p in pods}


def test_helm_upgrade_across_a_crd_change_keeps_reconciling(
    cluster: Cluster, api: client.ApiClient, namespaces: tuple[str, list[str]]
) -> None:
    custom, core = _custom(api), client.CoreV1Api(api)
    source, destinations = namespaces
    charts = list(ADDED_FIELDS)

    # The previous release is what runs: its chart version, and CRDs without the added fields.
    assert _release_versions(cluster) == dict.fromkeys(charts, PREVIOUS_VERSION), (
        "run hack/e2e-in-cluster.sh install-previous first"
    )
    for crd, added in ADDED_FIELDS.values():
        assert added not in _spec_fields(cluster, crd), f"{crd} is not the previous release's"

    # Work for each operator, reconciled by the previous release.
    core.create_namespaced_config_map(
        source,
        {
            "metadata": {
                "name": "settings",
                "annotations": {
                    "sync.opsuite.dev/allowed-namespaces": ",".join(destinations),
                    "note": "kept",
                },
            },
            "data": {"step": "0"},
        },
    )
    sync = {
        "apiVersion": "sync.opsuite.dev/v1alpha1",
        "kind": "ConfigMapSync",
        "metadata": {"name": "settings"},
        "spec": {
            "configMapName": "settings",
            "destinationNamespaces": destinations,
            "copyAnnotations": ["note"],
        },
    }
    stored = custom.create_namespaced_custom_object(
        "sync.opsuite.dev", "v1alpha1", source, "configmapsyncs", sync
    )
    assert "copyAnnotations" not in stored["spec"], "the previous CRD prunes the added field"
    custom.create_namespaced_custom_object(
        "apps.opsuite.dev", "v1alpha1", source, "podsets", _podset(2)
    )
    core.create_namespaced_pod(source, _debug_pod(api, "before"))
    debugger = {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "shell"},
        "spec": {
            "selector": {"matchLabels": DEBUG_LABELS},
            "image": BUSYBOX,
            "command": ["sleep", "3600"],
        },
    }
    custom.create_namespaced_custom_object(
        "debug.opsuite.dev", "v1alpha1", source, "poddebuggers", debugger
    )
    wait_until(
        lambda: _debug_containers(core, source),
        lambda found: set(found) == {"before"} and len(found["before"]) == 1,
        timeout=120,
        what="the debug container in pod before",
    )
    wait_until(
        lambda: _active_pods(core, source, "app=upgrade-web"),
        lambda pods: len(pods) == 2,
        timeout=60,
        what="2 PodSet pods",
    )
    web_before = {p.metadata.uid for p in _active_pods(core, source, "app=upgrade-web")}

    # The charts' READMEs: the plain server-side apply is refused on CRDs Helm made ...
    manifests = {chart: _crds_of(cluster, chart) for chart in charts}
    refused = _apply_crds(cluster, manifests["configmapsync-operator"])
    assert refused.returncode != 0
    assert 'conflict with "helm"' in refused.stderr, refused.stderr

    image_of = {chart: _image(api, chart) for chart in charts}
    prefixes = {image.rpartition("/")[0] for image in image_of.values()}
    tags = {image.rpartition(":")[2] for image in image_of.values()}
    (prefix,), (tag,) = prefixes, tags

    started = time.monotonic()
    with Load(api, source, destinations) as load:
        # ... the documented one takes the CRDs over, then helm upgrade rolls the operators.
        for chart in charts:
            done = _apply_crds(
                cluster, manifests[chart], "--force-conflicts", f"--field-manager={CRD_MANAGER}"
            )
            assert done.returncode == 0, done.stderr
        upgrade = subprocess.Popen(
            [str(ROOT / "hack" / "e2e-install.sh"), prefix, tag],
            env={
                **os.environ,
                "KUBECONFIG": str(cluster.kubeconfig),
                "PATH": f"{ROOT / '.local' / 'bin'}:{os.environ['PATH']}",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        custom.patch_namespaced_custom_object(
            "apps.opsuite.dev", "v1alpha1", source, "podsets", "web", {"spec": {"replicas": 4}}
        )
        core.create_namespaced_pod(source, _debug_pod(api, "during"))
        output, _ = upgrade.communicate(timeout=600)
        assert upgrade.returncode == 0, output
        upgraded = time.monotonic()
        core.create_namespaced_pod(source, _debug_pod(api, "after"))
        load.stop.wait(5 * LOAD_PERIOD)
    print(
        f"helm upgrade of 3 charts (CRDs first) {upgraded - started:.1f} s; "
        f"{len(load.copies.made)} source changes meanwhile, the slowest copied in "
        f"{load.copies.worst():.1f} s"
    )

    assert _release_versions(cluster) == dict.fromkeys(charts, VERSION)
    for crd, added in ADDED_FIELDS.values():
        assert added in _spec_fields(cluster, crd), crd

    # The PodSet: scaled during the upgrade, its two pods kept, none extra.
    wait_until(
        lambda: _active_pods(core, source, "app=upgrade-web"),
        lambda pods: len(pods) == 4,
        timeout=CATCH_UP,
        what="4 PodSet pods after the upgrade",
    )
    web_after = {p.metadata.uid for p in _active_pods(core, source, "app=upgrade-web")}
    assert web_before <= web_after
    # The PodDebugger: one container in each pod, whichever release injected it.
    found = wait_until(
        lambda: _debug_containers(core, source),
        lambda found: (
            set(found) == {"before", "during", "after"}
            and all(len(names) >= 1 for names in found.values())
        ),
        timeout=CATCH_UP,
        what="a debug container in each of before, during and after",
    )
    time.sleep(5)  # a duplicate would come from a second injection soon after the first
    assert _debug_containers(core, source) == found
    assert all(len(names) == 1 for names in found.values()), found

    # The added fields are kept now, and reconciled.
    patched = custom.patch_namespaced_custom_object(
        "sync.opsuite.dev",
        "v1alpha1",
        source,
        "configmapsyncs",
        "settings",
        {"spec": {"copyAnnotations": ["note"]}},
    )
    assert patched["spec"]["copyAnnotations"] == ["note"]
    wait_until(
        lambda: [
            (core.read_namespaced_config_map("settings", ns).metadata.annotations or {})
            for ns in destinations
        ],
        lambda annotations: all(a.get("note") == "kept" for a in annotations),
        timeout=60,
        what="the copies carrying the annotation copyAnnotations names",
    )
    strategy = {"type": "OnDelete"}
    ps = custom.patch_namespaced_custom_object(
        "apps.opsuite.dev",
        "v1alpha1",
        source,
        "podsets",
        "web",
        {"spec": {"updateStrategy": strategy}},
    )
    assert ps["spec"]["updateStrategy"] == strategy
    pd = custom.patch_namespaced_custom_object(
        "debug.opsuite.dev", "v1alpha1", source, "poddebuggers", "shell", {"spec": {"maxPods": 5}}
    )
    assert pd["spec"]["maxPods"] == 5
    wait_until(
        lambda: custom.get_namespaced_custom_object(
            "apps.opsuite.dev", "v1alpha1", source, "podsets", "web"
        ),
        lambda obj: (
            obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
        ),
        timeout=60,
        what="the PodSet's status observing the generation with updateStrategy",
    )
