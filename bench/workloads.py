"""The two pod controllers compared: a built-in ReplicaSet and a PodSet, with one pod template.

Both are reached through the generic custom-objects API (it serves built-in groups too) and
scaled through their scale subresource, as ``kubectl scale`` does, so the benchmark drives them
identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from bench.audit import Actor, by_user, by_user_agent
from bench.plane import read, request, request_json
from opsuite_common.kube import resource_path

REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
"""kube-controller-manager's ReplicaSet controller (it runs with its own service accounts)."""
PODSET_USER_AGENT = "podset-operator/"


def pod_template(app: str) -> dict[str, Any]:
    """The pod template both controllers get: a busybox sleeper (kwok fakes it Running)."""
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]
        },
    }


@dataclass(frozen=True)
class Workload:
    """A kind of pod controller under test."""

    label: str
    """Short name in reports."""
    group: str
    version: str
    kind: str
    plural: str
    actor: Actor
    """Which audit events are this controller's requests."""
    actor_description: str

    def manifest(self, name: str, replicas: int) -> dict[str, Any]:
        """The object to create: ``replicas`` pods of :func:`pod_template`."""
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": pod_template(name),
            },
        }

    def path(self, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
        """REST path of the collection, an object or its subresource."""
        return resource_path(
            f"{self.group}/{self.version}", self.plural, namespace, name, subresource
        )

    def create(self, api: client.ApiClient, namespace: str, name: str, replicas: int) -> None:
        """Create the controller object."""
        request_json(api, "POST", self.path(namespace), body=self.manifest(name, replicas))

    def scale(self, api: client.ApiClient, namespace: str, name: str, replicas: int) -> None:
        """Set the replica count through the scale subresource (a merge patch)."""
        response = request(
            api,
            "PATCH",
            self.path(namespace, name, "scale"),
            body={"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )
        read(response)

    def delete(self, api: client.ApiClient, namespace: str, name: str) -> None:
        """Delete the controller object (its pods, if any, are garbage-collected)."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        read(request(api, "DELETE", self.path(namespace, name), body=options))

    def settled(self, api: client.ApiClient, namespace: str, name: str, replicas: int) -> bool:
        """True when the status reports ``replicas`` pods, all ready, for the current spec."""
        obj = request_json(api, "GET", self.path(namespace, name))
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == obj["metadata"].get("generation")
            and (status.get("replicas") or 0) == replicas
            and (status.get("readyReplicas") or 0) == replicas
        )


REPLICASET = Workload(
    label="ReplicaSet",
    group="apps",
    version="v1",
    kind="ReplicaSet",
    plural="replicasets",
    actor=by_user(REPLICASET_CONTROLLER),
    actor_description=f"user {REPLICASET_CONTROLLER}",
)

PODSET = Workload(
    label="PodSet",
    group="apps.opsuite.dev",
    version="v1alpha1",
    kind="PodSet",
    plural="podsets",
    actor=by_user_agent(PODSET_USER_AGENT),
    actor_description=f"User-Agent {PODSET_USER_AGENT}*",
)
