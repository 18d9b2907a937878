"""Helpers for the PodDebugger e2e tests: CRD, operator process, pods, debuggers, events.

Isolation on a shared cluster: every test run picks a run id; its namespaces are
``pdbg-<run>-<suffix>``, the operator serves exactly those (``--namespace``) and its User-Agent
carries ``pdbg-e2e-<run>`` (POD_NAME), so concurrent runs never see each other's objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml
from kubernetes import client

from e2e.cluster import ROOT, Cluster, wait_until
from e2e.operators import OperatorHandle, operator_handle, start_operator
from e2e.placement import real_pod_spec
from e2e.resources import CustomObjects, CustomResource, NamespacePool

GROUP, VERSION, PLURAL = "debug.opsuite.dev", "v1alpha1", "poddebuggers"
CRD_DIR = ROOT / "charts" / "pod-debugger-operator" / "crds"
DOC = ROOT / "docs" / "poddebugger.md"
ALLOWED_PREFIX = "busybox"
"""The module's operator runs with --allowed-image-prefix=busybox."""
DEFAULT_IMAGE = "docker.io/library/busybox"
"""A PodDebugger's image unless a test says otherwise: under an allowlist it names its
registry (a short name is refused)."""
OPT_OUT = "--allow-without-admission-policy"
"""The operators of the behaviour tests run without the cluster-wide admission policies (other
runs share the cluster) and so opt out of needing them; test_poddebugger_security runs them
without it."""

RESTRICTED_CONTAINER = {
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
}


RESOURCE = CustomResource(GROUP, VERSION, "PodDebugger", PLURAL, CRD_DIR)
install_crd = RESOURCE.install_crd


class Pool(NamespacePool):
    """The namespaces of one test run: ``name("a")`` is ``pdbg-<run>-a``; its operator runs with
    --allowed-image-prefix=busybox and :data:`OPT_OUT`."""

    RESOURCE = RESOURCE
    PREFIX = "pdbg"
    COMMAND = "pod-debugger-operator"
    FLAGS = (f"--allowed-image-prefix={ALLOWED_PREFIX}", OPT_OUT)
    SUFFIXES = ("a", "b", "c", "d", "e", "end", "other", "psa", "relax", "policy", "images")
    CREATED_UP_FRONT = SUFFIXES
    LABELS: ClassVar[Mapping[str, Mapping[str, str]]] = {
        s: {"pod-security.kubernetes.io/enforce": "restricted"} for s in ("psa", "relax")
    }


def namespace_operator(cluster: Cluster, namespace: str, log_dir: Path) -> OperatorHandle:
    """The pod-debugger-operator for a test in ``namespace``: a ready process serving only it
    with the pool's flags, or the one in the cluster (e2e.operators)."""
    return operator_handle(
        cluster,
        Pool.COMMAND,
        lambda: start_operator(
            cluster,
            Pool.COMMAND,
            [namespace],
            log_dir,
            *Pool.FLAGS,
            POD_NAME=f"pdbg-e2e-{namespace}",
        ),
    )


def debugger_manifest(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A PodDebugger selecting ``labels``; ``spec`` keys are the API's camelCase fields."""
    return RESOURCE.manifest(
        name,
        {
            "selector": {"matchLabels": labels},
            "image": DEFAULT_IMAGE,
            "command": ["sleep", "3600"],
            **spec,
        },
    )


def doc_examples(section: str) -> list[dict[str, Any]]:
    """The YAML examples under the heading ``## section`` of docs/poddebugger.md, in order
    (so that the tests apply what the page shows)."""
    text = DOC.read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def ephemeral(pod: client.V1Pod) -> list[str]:
    """Names of the pod's ephemeral containers."""
    return [c.name for c in pod.spec.ephemeral_containers or []]


class Debuggers(CustomObjects):
    """PodDebugger and pod access; remembers the debuggers it created for clean-up."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api, RESOURCE)

    def wait_debugged(self, namespace: str, name: str, count: int, timeout: float = 60) -> Any:
        """Wait for Ready=True with ``count`` pods holding the current container."""
        return self.wait_ready_with(namespace, name, "debuggedCount", count, timeout)

    # --- pods ------------------------------------------------------------------------------

    def run_pod(
        self,
        namespace: str,
        name: str,
        labels: dict[str, str],
        *,
        restricted: bool = False,
        real: bool = False,
    ) -> None:
        """Create a pod and wait until it is Running.

        ``real``: busybox:1.37 sleep 3600 on a node that runs containers (e2e.placement), for
        tests that claim something runs in the pod; otherwise nginx wherever the scheduler puts
        it (a kwok node on the local plane, where nothing runs)."""
        spec: dict[str, Any] = (
            real_pod_spec(self.core.api_client)
            if real
            else {"containers": [{"name": "main", "image": "nginx"}]}
        )
        if restricted:
            spec["containers"][0].update(RESTRICTED_CONTAINER)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
        self.core.create_namespaced_pod(namespace, body)
        wait_until(
            lambda: self.core.read_namespaced_pod(name, namespace).status.phase,
            lambda phase: phase == "Running",
            timeout=120 if real else 60,
            what=f"pod {namespace}/{name} Running",
        )

    def pod(self, namespace: str, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, namespace)

    def events(self, namespace: str, kind: str, name: str) -> list[client.CoreV1Event]:
        """Events about one object."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        return list(self.core.list_namespaced_event(namespace, field_selector=selector).items or [])
