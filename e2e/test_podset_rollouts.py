"""PodSet rollouts a user steers: pause and resume, with pods that run on the real node.

The kubectl commands are the ones docs/podset.md shows, in the same form. Few pods (at most four
at a time): the local real node has two cores.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client

from e2e.cluster import Cluster, condition, wait_until
from e2e.operators import OperatorHandle
from e2e.placement import real_pod_spec
from e2e.podset_support import PodSets, podset

TEMPLATE_HASH_LABEL = "opsuite.dev/pod-template-hash"
PAUSED_WATCH_SECONDS = 8
"""How long a paused PodSet with a changed template is watched for a rollout (none may come)."""
STRATEGY = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _running_and_ready(podsets: PodSets, selector: str, count: int) -> list[client.V1Pod]:
    """Exactly ``count`` active pods, each Running and Ready (on the real node: a kubelet's)."""
    return wait_until(
        lambda: podsets.active_pods(selector),
        lambda pods: (
            len(pods) == count and all(p.status.phase == "Running" and _ready(p) for p in pods)
        ),
        timeout=120,
        what=f"{count} pods matching {selector} Running and Ready",
    )


def _hashes(pods: list[client.V1Pod]) -> set[str]:
    return {p.metadata.labels[TEMPLATE_HASH_LABEL] for p in pods}


def _real_podset(api: client.ApiClient, name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    body = podset(name, replicas, **spec)
    body["spec"]["template"]["spec"] = real_pod_spec(api)
    return body


def _progressing(ps: dict[str, Any]) -> tuple[str, str]:
    found = condition(ps, "Progressing")
    return found.get("status", ""), found.get("reason", "")


def _patch(cluster: Cluster, namespace: str, name: str, patch: dict[str, Any]) -> None:
    """``kubectl patch pset/NAME --type=merge -p '...'`` as docs/podset.md shows it."""
    cluster.kubectl(
        "patch", f"pset/{name}", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )


def test_paused_podset_scales_but_rolls_out_only_when_resumed(
    cluster: Cluster,
    api: client.ApiClient,
    podset_op: OperatorHandle,
    podsets: PodSets,
    namespace: str,
) -> None:
    """Paused: a template change replaces no pod for PAUSED_WATCH_SECONDS and Progressing says
    Paused; kubectl scale still adds a pod. Resumed: every pod is replaced from the new
    template, and they run and get Ready on the real node."""
    name, selector = "web", "app=web"
    podsets.create(_real_podset(api, name, 2, updateStrategy=STRATEGY))
    before = _running_and_ready(podsets, selector, 2)
    (old_hash,) = _hashes(before)

    _patch(cluster, namespace, name, {"spec": {"paused": True}})
    version_2 = {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}}
    _patch(cluster, namespace, name, version_2)
    ps = podsets.wait_status(name)
    assert _progressing(ps) == ("Unknown", "Paused"), ps["status"]
    assert "0/2 updated" in condition(ps, "Progressing")["message"], ps["status"]
    time.sleep(PAUSED_WATCH_SECONDS)
    pods = podsets.pods(selector)
    assert {p.metadata.name for p in pods} == {p.metadata.name for p in before}, "a rollout began"
    assert _hashes(pods) == {old_hash}

    cluster.kubectl("scale", f"pset/{name}", "-n", namespace, "--replicas=3")
    scaled = _running_and_ready(podsets, selector, 3)
    assert {p.metadata.name for p in before} <= {p.metadata.name for p in scaled}
    ps = podsets.wait_status(name, replicas=3, readyReplicas=3)
    assert _progressing(ps) == ("Unknown", "Paused"), ps["status"]

    _patch(cluster, namespace, name, {"spec": {"paused": False}})
    resumed = wait_until(
        lambda: podsets.active_pods(selector),
        lambda pods: (
            len(pods) == 3
            and old_hash not in _hashes(pods)
            and all(p.status.phase == "Running" and _ready(p) for p in pods)
        ),
        timeout=180,
        what="3 pods of the new template Running and Ready",
    )
    assert not {p.metadata.name for p in before} & {p.metadata.name for p in resumed}
    cluster.kubectl(
        "wait",
        f"pset/{name}",
        "-n",
        namespace,
        '--for=jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=Complete',
        "--timeout=60s",
    )
    ps = podsets.wait_status(name, replicas=3, updatedReplicas=3, availableReplicas=3)
    assert condition(ps, "Ready")["status"] == "True", ps["status"]
