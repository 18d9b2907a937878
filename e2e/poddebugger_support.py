"""Helpers for the PodDebugger e2e tests: CRD, operator process, pods, debuggers, events.

Isolation on a shared cluster: every test run picks a run id; its namespaces are
``pdbg-<run>-<suffix>``, the operator serves exactly those (``--namespace``) and its User-Agent
carries ``pdbg-e2e-<run>`` (POD_NAME), so concurrent runs never see each other's objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.cluster import ROOT, Cluster, condition, wait_observed, wait_until
from e2e.operators import OperatorHandle, OperatorProcess, operator_env, operator_handle
from e2e.placement import real_pod_spec

GROUP, VERSION, PLURAL = "debug.opsuite.dev", "v1alpha1", "poddebuggers"
CRD_DIR = ROOT / "charts" / "pod-debugger-operator" / "crds"
ALLOWED_PREFIX = "busybox"
"""The module's operator runs with --allowed-image-prefix=busybox."""
OPT_OUT = "--allow-without-admission-policy"
"""The operators of the behaviour tests run without the cluster-wide admission policies (other
runs share the cluster) and so opt out of needing them; test_poddebugger_security runs them
without it."""
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

RESTRICTED_CONTAINER = {
    "securityContext": {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
}


def install_crd(cluster: Cluster) -> None:
    """Apply the generated PodDebugger CRD and wait until it is served."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}")


class Pool:
    """The namespaces of one test run: ``name("a")`` is ``pdbg-<run>-a``."""

    SUFFIXES = ("a", "b", "c", "d", "e", "other", "psa", "relax", "policy", "images")

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex[:6]
        self.identity = f"pdbg-e2e-{self.run}"

    def name(self, suffix: str) -> str:
        assert suffix in self.SUFFIXES, suffix
        return f"pdbg-{self.run}-{suffix}"

    def all(self) -> list[str]:
        return [self.name(s) for s in self.SUFFIXES]


def start_operator(cluster: Cluster, pool: Pool, log_dir: Path, *extra: str) -> OperatorProcess:
    """A pod-debugger-operator serving exactly the pool's namespaces."""
    log = log_dir / f"pod-debugger-operator-{uuid.uuid4().hex[:6]}.log"
    return OperatorProcess(
        "pod-debugger-operator",
        [*(f"--namespace={ns}" for ns in pool.all()), *extra],
        log,
        operator_env(cluster, "pod-debugger-operator", POD_NAME=pool.identity),
    ).start()


def namespace_operator(cluster: Cluster, namespace: str, log_dir: Path) -> OperatorHandle:
    """The pod-debugger-operator for a test in ``namespace``: a ready process serving only it
    with --allowed-image-prefix=busybox (and :data:`OPT_OUT`), or the one in the cluster
    (e2e.operators)."""
    log = log_dir / f"pod-debugger-operator-{uuid.uuid4().hex[:6]}.log"
    return operator_handle(
        cluster,
        "pod-debugger-operator",
        lambda: OperatorProcess(
            "pod-debugger-operator",
            [f"--namespace={namespace}", f"--allowed-image-prefix={ALLOWED_PREFIX}", OPT_OUT],
            log,
            operator_env(cluster, "pod-debugger-operator", POD_NAME=f"pdbg-e2e-{namespace}"),
        ).start(),
    )


def pool_operator(cluster: Cluster, pool: Pool, log_dir: Path) -> OperatorHandle:
    """The pod-debugger-operator for the pool's tests: a ready process serving exactly the pool's
    namespaces with --allowed-image-prefix=busybox (and :data:`OPT_OUT`), or the one in the
    cluster (e2e.operators)."""
    return operator_handle(
        cluster,
        "pod-debugger-operator",
        lambda: start_operator(
            cluster, pool, log_dir, f"--allowed-image-prefix={ALLOWED_PREFIX}", OPT_OUT
        ),
    )


def debugger_manifest(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A PodDebugger selecting ``labels``; ``spec`` keys are the API's camelCase fields."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodDebugger",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "image": "busybox",
            "command": ["sleep", "3600"],
            **spec,
        },
    }


def ephemeral(pod: client.V1Pod) -> list[str]:
    """Names of the pod's ephemeral containers."""
    return [c.name for c in pod.spec.ephemeral_containers or []]


class Debuggers:
    """PodDebugger and pod access; remembers the debuggers it created for clean-up."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.created: list[tuple[str, str]] = []

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body
        )
        self.created.append((namespace, body["metadata"]["name"]))
        return result

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
        return result

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, patch
        )
        return result

    def delete(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def wait(
        self,
        namespace: str,
        name: str,
        done: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """Wait until the debugger satisfies ``done`` with a status of its current generation."""
        return wait_observed(
            lambda: self.get(namespace, name), done, what=f"{name}: {what}", timeout=timeout
        )

    def wait_debugged(self, namespace: str, name: str, count: int, timeout: float = 60) -> Any:
        """Wait for Ready=True with ``count`` pods holding the current container."""
        return self.wait(
            namespace,
            name,
            lambda o: (
                condition(o, "Ready").get("status") == "True"
                and o["status"].get("debuggedCount") == count
            ),
            f"Ready with {count} debugged",
            timeout,
        )

    def cleanup(self) -> None:
        for namespace, name in self.created:
            self.delete(namespace, name)

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
