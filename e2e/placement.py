"""Where a pod must go to really run, and what it runs there.

On the local plane every node but one is a kwok fake: pods scheduled there are reported Running
and nothing runs. The one real node (hack/node.py) carries the label and the NoSchedule taint
``opsuite.dev/real-node=true``, so only pods that ask land on it. On kind every node is real.
A test that claims a container runs puts its pods where :func:`real_node_placement` says, with
:data:`BUSYBOX` (an image the real node has: nothing can be pulled there).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

REAL_NODE_LABEL = "opsuite.dev/real-node"
"""Label (value ``true``) and NoSchedule taint key of the local plane's real node."""
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages the nodes annotated ``kwok.x-k8s.io/node=fake``."""
BUSYBOX = "docker.io/library/busybox:1.37"
"""Image of pods that really run: loaded into the local real node, pulled on kind. A tag, not
``latest``, so the kubelet does not try to pull it again (imagePullPolicy IfNotPresent)."""
SLEEP = ["sleep", "3600"]


def is_kwok(node: client.V1Node) -> bool:
    """Whether ``node`` is a kwok fake (its pods never run)."""
    annotations = node.metadata.annotations or {}
    labels = node.metadata.labels or {}
    return annotations.get(KWOK_ANNOTATION) == "fake" or labels.get("type") == "kwok"


def _ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def real_node_placement(api: client.ApiClient) -> dict[str, Any]:
    """Pod-spec fields that put a pod on a node that runs containers.

    - a node labelled ``opsuite.dev/real-node=true`` (the local plane): its nodeSelector and a
      toleration of its taint;
    - no kwok node (kind, most clusters): ``{}``, every node runs containers;
    - kwok nodes and unlabelled other ones: a node affinity for the others by hostname;
    - only kwok nodes, or a labelled node that is not Ready: the test fails, saying so.
    """
    nodes = client.CoreV1Api(api).list_node().items
    labelled = [n for n in nodes if (n.metadata.labels or {}).get(REAL_NODE_LABEL) == "true"]
    if labelled:
        if not any(_ready(n) for n in labelled):
            names = ", ".join(n.metadata.name for n in labelled)
            pytest.fail(
                f"the cluster's node(s) labelled {REAL_NODE_LABEL}=true ({names}) not Ready"
            )
        return {
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [
                {
                    "key": REAL_NODE_LABEL,
                    "operator": "Equal",
                    "value": "true",
                    "effect": "NoSchedule",
                }
            ],
        }
    real = [n for n in nodes if not is_kwok(n)]
    if len(real) == len(nodes):
        return {}
    if not real:
        pytest.fail(
            "the cluster has no node that runs containers: every node is a kwok fake and none "
            f"is labelled {REAL_NODE_LABEL}=true (start the local plane's real node, hack/node.py)"
        )
    hostnames = sorted(
        (n.metadata.labels or {}).get("kubernetes.io/hostname", n.metadata.name) for n in real
    )
    term = {
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": hostnames}
        ]
    }
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    }


def sleeper(name: str = "main") -> dict[str, Any]:
    """A container that runs for an hour: ``busybox:1.37 sleep 3600``."""
    return {"name": name, "image": BUSYBOX, "command": list(SLEEP)}


def real_pod_spec(api: client.ApiClient, **spec: Any) -> dict[str, Any]:
    """A pod spec of one :func:`sleeper` placed by :func:`real_node_placement`; ``spec``
    overrides or adds fields. A 1 s grace period: sleep, as PID 1, ignores SIGTERM, and a
    deleted pod would hold one of the real node's few slots for 30 s."""
    return {
        "containers": [sleeper()],
        "terminationGracePeriodSeconds": 1,
        **real_node_placement(api),
        **spec,
    }
