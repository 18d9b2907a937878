"""PodSet behaviour on a real API server, with kwok making pods Running."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.cluster import Cluster, wait_until
from e2e.operators import OperatorProcess
from e2e.podset_support import (
    GROUP,
    PLURAL,
    VERSION,
    PodSets,
    condition,
    install_crd,
    podset,
    start_podset_operator,
)


@pytest.fixture(scope="module")
def crd(cluster: Cluster) -> None:
    install_crd(cluster)


@pytest.fixture
def operator(
    cluster: Cluster, crd: None, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    proc = start_podset_operator(cluster, namespace, tmp_path)
    proc.wait_ready()
    yield proc
    code = proc.stop()
    assert code == 0, f"operator exited {code} on SIGTERM; log:\n{proc.log_tail()}"


@pytest.fixture
def podsets(api: client.ApiClient, namespace: str) -> PodSets:
    return PodSets(api, namespace)


def test_scale_up_down_and_garbage_collection(
    cluster: Cluster, operator: OperatorProcess, podsets: PodSets, namespace: str
) -> None:
    podsets.create(podset("web", 3))
    pods = podsets.wait_running("app=web", 3)
    for pod in pods:
        assert pod.metadata.generate_name == "web-"
        (ref,) = pod.metadata.owner_references
        assert (ref.kind, ref.name, ref.controller, ref.block_owner_deletion) == (
            "PodSet",
            "web",
            True,
            True,
        )
        assert "opsuite.dev/pod-template-hash" in pod.metadata.labels
    ps = podsets.wait_status(
        "web", replicas=3, readyReplicas=3, availableReplicas=3, updatedReplicas=3
    )
    assert sorted(ps["status"]["podNames"]) == sorted(p.metadata.name for p in pods)
    assert condition(ps, "Ready")["status"] == "True"
    assert condition(ps, "Ready")["observedGeneration"] == ps["metadata"]["generation"]
    assert condition(ps, "Degraded")["status"] == "False"

    # kubectl scale goes through the scale subresource, which reports the selector for HPA.
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=5")
    podsets.wait_running("app=web", 5)
    scale = json.loads(
        cluster.kubectl(
            "get", "--raw", f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/web/scale"
        )
    )
    assert scale["spec"]["replicas"] == 5
    assert scale["status"]["selector"] == "apps.opsuite.dev/podset=web"
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=0")
    podsets.wait_running("app=web", 0)
    podsets.wait_status("web", replicas=0, readyReplicas=0)
    cluster.kubectl("scale", f"{PLURAL}.{GROUP}/web", "-n", namespace, "--replicas=2")
    podsets.wait_running("app=web", 2)

    # Deleting the PodSet garbage-collects its pods (kube-controller-manager, ownerReferences).
    podsets.delete("web")
    wait_until(lambda: podsets.pods("app=web"), lambda p: not p, timeout=60, what="pods collected")

    text = operator.metrics()
    assert 'controller_runtime_reconcile_total{controller="podset",result="success"}' in text


def test_deleted_and_failed_pods_are_replaced(operator: OperatorProcess, podsets: PodSets) -> None:
    podsets.create(podset("replace", 3))
    pods = podsets.wait_running("app=replace", 3)
    podsets.core.delete_namespaced_pod(pods[0].metadata.name, podsets.namespace)
    failed = pods[1].metadata.name
    podsets.core.patch_namespaced_pod_status(
        failed, podsets.namespace, {"status": {"phase": "Failed"}}
    )
    survivors = wait_until(
        lambda: podsets.active_pods("app=replace"),
        lambda ps: (
            len(ps) == 3
            and all(p.status.phase == "Running" for p in ps)
            and pods[0].metadata.name not in {p.metadata.name for p in ps}
            and failed not in {p.metadata.name for p in ps}
        ),
        timeout=60,
        what="replacements for the deleted and the Failed pod",
    )
    assert pods[2].metadata.name in {p.metadata.name for p in survivors}


def test_rolling_update_stays_within_surge(operator: OperatorProcess, podsets: PodSets) -> None:
    strategy = {
        "updateStrategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }
    }
    podsets.create(podset("roll", 4, **strategy))
    old = {p.metadata.name for p in podsets.wait_running("app=roll", 4)}
    podsets.patch(
        "roll",
        {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}},
    )
    highest = 0

    def probe() -> list[client.V1Pod]:
        nonlocal highest
        pods = podsets.active_pods("app=roll")
        highest = max(highest, len(pods))
        return pods

    wait_until(
        probe,
        lambda ps: (
            len(ps) == 4
            and all(p.status.phase == "Running" for p in ps)
            and not old & {p.metadata.name for p in ps}
        ),
        timeout=120,
        interval=0.1,
        what="all 4 pods replaced by the new template",
    )
    assert highest <= 5, f"observed {highest} active pods, more than replicas + maxSurge"
    ps = podsets.wait_status("roll", replicas=4, updatedReplicas=4, readyReplicas=4)
    assert condition(ps, "Progressing")["status"] == "False"


def test_adoption_and_release(operator: OperatorProcess, podsets: PodSets) -> None:
    orphan = {
        "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    podsets.core.create_namespaced_pod(podsets.namespace, orphan)
    # OnDelete keeps an adopted pod although it is not from the current template (RollingUpdate
    # would replace it).
    podsets.create(
        podset(
            "adopt",
            2,
            selector={"matchLabels": {"app": "adopt"}},
            updateStrategy={"type": "OnDelete"},
        )
    )
    pods = podsets.wait_running("app=adopt", 2)
    owners = {p.metadata.name: [r.name for r in p.metadata.owner_references or []] for p in pods}
    assert owners.get("orphan") == ["adopt"], owners  # adopted instead of creating two
    # A pod whose labels stop matching is released (kept, no longer owned) and replaced.
    podsets.core.patch_namespaced_pod(
        "orphan", podsets.namespace, {"metadata": {"labels": {"app": "gone"}}}
    )
    released = wait_until(
        lambda: podsets.core.read_namespaced_pod("orphan", podsets.namespace),
        lambda p: not p.metadata.owner_references,
        timeout=60,
        what="the relabelled pod released",
    )
    assert released.metadata.deletion_timestamp is None
    podsets.wait_running("app=adopt", 2)


def test_rejected_template_sets_degraded_and_others_keep_working(
    operator: OperatorProcess, podsets: PodSets
) -> None:
    bad = podset("bad", 2)
    bad["spec"]["template"]["spec"]["containers"][0]["name"] = "Not_A_DNS_Label"
    podsets.create(bad)
    podsets.create(podset("good", 2))
    ps = wait_until(
        lambda: podsets.get("bad"),
        lambda p: condition(p, "Degraded").get("status") == "True",
        timeout=60,
        what="Degraded on the PodSet whose pods are rejected",
    )
    degraded = condition(ps, "Degraded")
    assert degraded["reason"] == "FailedCreate"
    assert "Not_A_DNS_Label" in degraded["message"]
    podsets.wait_running("app=good", 2)
    assert operator.alive()


INVALID_SPECS = [
    ("negative replicas", {"replicas": -1}, "spec.replicas"),
    (
        "selector not matching template",
        {"selector": {"matchLabels": {"app": "other"}}},
        "selector does not match template labels",
    ),
    ("empty selector", {"selector": {}}, "empty selector would match every pod"),
    (
        "rollingUpdate with OnDelete",
        {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"maxSurge": 1}}},
        "rollingUpdate is only allowed with type RollingUpdate",
    ),
    (
        "bad percentage",
        {"updateStrategy": {"rollingUpdate": {"maxSurge": "ten%"}}},
        "non-negative integer or a percentage",
    ),
    ("unknown strategy", {"updateStrategy": {"type": "Recreate"}}, "Unsupported value"),
    ("no template", {"template": None}, "spec.template"),
    (
        "empty containers",
        {"template": {"metadata": {"labels": {"app": "invalid"}}, "spec": {"containers": []}}},
        "should have at least 1 items",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "message"), INVALID_SPECS, ids=[c[0] for c in INVALID_SPECS]
)
def test_invalid_specs_are_rejected_by_the_api_server(
    crd: None, podsets: PodSets, case: str, spec: dict[str, object], message: str
) -> None:
    body = podset("invalid", 1)
    body["spec"].update(spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    with pytest.raises(ApiException) as rejected:
        podsets.create(body)
    assert rejected.value.status == 422, case
    assert message in (rejected.value.body or ""), rejected.value.body
