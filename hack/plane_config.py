"""The files and manifests the local plane's components read, as text: the API server's audit
policy, kube-scheduler's configuration, the registry's, kwok's fake nodes and CoreDNS's RBAC.
hack/localplane.py writes or applies them where each component looks.

Standard library only (hack/doctor.py imports hack/localplane.py before any virtualenv).
"""

from __future__ import annotations

import json
from pathlib import Path

FAKE_NODE_PODS = 1100
"""Pods each kwok node takes."""

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version"]
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
"""

COREDNS_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: system:coredns
"""
"""kubeadm's role for CoreDNS, bound to the plane's CoreDNS client certificate."""


def fake_nodes_manifest(count: int) -> str:
    """``count`` kwok nodes (``kwok-node-<i>``), spread over three zones."""
    nodes = []
    for i in range(count):
        capacity = {"cpu": "64", "memory": "256Gi", "pods": str(FAKE_NODE_PODS)}
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"kwok-node-{i}",
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                    },
                    "labels": {
                        "type": "kwok",
                        "kubernetes.io/hostname": f"kwok-node-{i}",
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "topology.kubernetes.io/zone": f"zone-{i % 3}",
                    },
                },
                "status": {"allocatable": capacity, "capacity": capacity},
            }
        )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes})


def scheduler_config(kubeconfig: Path) -> str:
    """kube-scheduler's configuration: its client's QPS and burst raised from 50/100 to
    500/1000, so that binding pods (500 at once in the benchmarks, 20,000 in the scale curve)
    is not the plane's bottleneck; the file replaces the --kubeconfig and --leader-elect flags."""
    return json.dumps(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": False},
        },
        indent=2,
    )


def registry_config(addr: str, storage: Path) -> str:
    """distribution's configuration: plain HTTP on ``addr``, blobs under ``storage``."""
    return json.dumps(
        {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {
                "filesystem": {"rootdirectory": str(storage)},
                "delete": {"enabled": True},
            },
            "http": {"addr": addr},
        },
        indent=2,
    )
