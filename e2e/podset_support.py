"""Helpers for the PodSet e2e tests: CRD install, operator process, object access."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from e2e.cluster import ROOT, Cluster, wait_until
from e2e.operators import OperatorProcess, operator_env

GROUP, VERSION, PLURAL = "apps.opsuite.dev", "v1alpha1", "podsets"
CRD_DIR = ROOT / "charts" / "podset-operator" / "crds"


def install_crd(cluster: Cluster) -> None:
    """Apply the generated PodSet CRD and wait until it is served."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}")


def start_podset_operator(
    cluster: Cluster, namespace: str, log_dir: Path, *extra: str
) -> OperatorProcess:
    """A podset-operator serving only ``namespace``."""
    log = log_dir / f"podset-operator-{uuid.uuid4().hex[:6]}.log"
    return OperatorProcess(
        "podset-operator",
        [f"--namespace={namespace}", *extra],
        log,
        operator_env(cluster),
    ).start()


def podset(
    name: str, replicas: int, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A PodSet manifest running busybox sleepers."""
    labels = labels or {"app": name}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSet",
        "metadata": {"name": name},
        "spec": {
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
    }


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


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    """The condition of ``type_`` in ``obj.status.conditions`` ({} when absent)."""
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return {}
