"""The OLM bundles on a real API server: OLM's own CRDs (from the pinned operator-framework/api
module), each bundle's manifests accepted with a server-side dry run, and OLM's olm-operator
(pinned operator-lifecycle-manager, run as a local process) taking each CSV to Succeeded.

Without OLM's catalog-operator, nothing turns a Subscription into an InstallPlan, whose steps
create the CSV's ServiceAccount and the Roles and bindings of its ``permissions`` and
``clusterPermissions``; the last test creates exactly those from the CSV, as the InstallPlan
would, and olm-operator checks them against the CSV before it deploys.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from e2e.charts import token_kubeconfig
from e2e.cluster import ROOT, Cluster, condition, wait_until
from e2e.operators import OperatorProcess
from e2e.poddebugger_support import Debuggers, debugger_manifest, ephemeral
from opsuite_packaging.bundle import TARGET_NAMESPACES_ENV
from opsuite_packaging.operators import OPERATORS

PACKAGES = tuple(op.image for op in OPERATORS)
BIN = ROOT / ".local" / "bin"
OLM_GROUP = "operators.coreos.com"


def _manifests(package: str) -> list[dict[str, Any]]:
    directory = ROOT / "bundle" / package / "manifests"
    return [yaml.safe_load(path.read_text()) for path in sorted(directory.glob("*.yaml"))]


def _resource_name(obj: dict[str, Any]) -> str:
    """The object as ``kubectl -o name`` prints it."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"].lower()
    return (
        f"{kind}.{group}/{obj['metadata']['name']}"
        if group
        else f"{kind}/{obj['metadata']['name']}"
    )


def _csv(package: str) -> dict[str, Any]:
    (csv,) = [m for m in _manifests(package) if m["kind"] == "ClusterServiceVersion"]
    return csv


@pytest.fixture(scope="module")
def olm_crds(cluster: Cluster) -> None:
    """OLM's CRDs, from the module the bundle validator pins, applied and established."""
    module_dir = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/operator-framework/api"],
        cwd=ROOT / "hack" / "tools" / "bundle-validate",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    crds = sorted((Path(module_dir) / "crds").glob("*.yaml"))
    assert len(crds) >= 8, crds
    for path in crds:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in crds]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", *names)


@pytest.mark.parametrize("package", PACKAGES)
def test_bundle_manifests_are_accepted_by_the_api_server(
    cluster: Cluster, olm_crds: None, namespace: str, package: str
) -> None:
    out = cluster.kubectl(
        *("apply", "--server-side", "--force-conflicts", "--field-manager=bundle-dry-run"),
        *("--dry-run=server", "-n", namespace, "-o", "name"),
        *("-f", str(ROOT / "bundle" / package / "manifests")),
    )
    assert sorted(out.split()) == sorted(map(_resource_name, _manifests(package)))


def test_the_api_server_checks_csvs_against_olms_schema(
    cluster: Cluster, olm_crds: None, namespace: str
) -> None:
    csv = _csv("podset-operator")
    csv["spec"]["installModes"] = "AllNamespaces"
    with pytest.raises(RuntimeError, match=r"spec\.installModes"):
        cluster.kubectl(
            *("apply", "--dry-run=server", "-n", namespace, "-f", "-"), stdin=yaml.safe_dump(csv)
        )


@dataclass(frozen=True)
class Olm:
    """The running olm-operator and the namespace of its OperatorGroup."""

    namespace: str
    process: subprocess.Popen[bytes]

    def phase(self, cluster: Cluster, csv: str) -> str:
        """The CSV's phase; raises (the error a timed-out wait reports) once olm-operator has
        exited."""
        assert self.process.poll() is None, "olm-operator exited; see .local/olm-*.log"
        return cluster.kubectl(
            "get", "csv", csv, "-n", self.namespace, "-o", "jsonpath={.status.phase}"
        )


@pytest.fixture(scope="module")
def olm_operator(cluster: Cluster, olm_crds: None, api: client.ApiClient) -> Iterator[Olm]:
    """olm-operator as a local process, and a fresh namespace holding an OwnNamespace
    OperatorGroup (the operators' namespace is their only target namespace, so nothing is
    copied into other namespaces)."""
    namespace = f"olm-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    log = (ROOT / ".local" / f"olm-{namespace}.log").open("w")
    process = subprocess.Popen(
        [
            str(BIN / "olm"),
            # All namespaces: --watchedNamespaces with one namespace crashes olm v0.46.0.
            *("--namespace", namespace),
            *("--writeStatusName", "", "--writePackageServerStatusName", ""),
        ],
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        cluster.kubectl(
            "apply",
            "-f",
            "-",
            stdin=yaml.safe_dump(
                {
                    "apiVersion": f"{OLM_GROUP}/v1",
                    "kind": "OperatorGroup",
                    "metadata": {"name": "opsuite", "namespace": namespace},
                    "spec": {"targetNamespaces": [namespace]},
                }
            ),
        )
        yield Olm(namespace, process)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        core.delete_namespace(namespace, propagation_policy="Background")
        _delete_olm_cluster_roles(cluster, namespace)


def _delete_olm_cluster_roles(cluster: Cluster, namespace: str) -> None:
    """The ClusterRoles OLM leaves behind: its OperatorGroup's, and the admin/edit/view roles
    it aggregates for each provided API (owned by the CRD, which stays)."""
    cluster.kubectl("delete", "clusterrole", "-l", f"olm.owner.namespace={namespace}")
    for package in PACKAGES:
        for crd in (m for m in _manifests(package) if m["kind"] == "CustomResourceDefinition"):
            for version in crd["spec"]["versions"]:
                prefix = f"{crd['metadata']['name']}-{version['name']}"
                names = [f"{prefix}-{role}" for role in ("admin", "edit", "view", "crdview")]
                cluster.kubectl("delete", "clusterrole", "--ignore-not-found", *names)


def _install_plan_objects(csv: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """What an InstallPlan creates for the CSV's install strategy: ServiceAccounts, a Role and
    RoleBinding per ``permissions`` entry, a ClusterRole and binding per ``clusterPermissions``
    entry."""
    strategy = csv["spec"]["install"]["spec"]
    name = csv["metadata"]["name"].replace(".", "-")
    objects: list[dict[str, Any]] = []
    rbac = "rbac.authorization.k8s.io"
    for scope, entries in (
        ("Role", strategy["permissions"]),
        ("ClusterRole", strategy.get("clusterPermissions", [])),
    ):
        for index, entry in enumerate(entries):
            account = entry["serviceAccountName"]
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": namespace},
                }
            )
            metadata: dict[str, Any] = {"name": f"{name}-{namespace}-{index}"}
            if scope == "Role":
                metadata["namespace"] = namespace
            objects.append(
                {
                    "apiVersion": f"{rbac}/v1",
                    "kind": scope,
                    "metadata": metadata,
                    "rules": entry["rules"],
                }
            )
            objects.append(
                {
                    "apiVersion": f"{rbac}/v1",
                    "kind": f"{scope}Binding",
                    "metadata": metadata,
                    "roleRef": {"apiGroup": rbac, "kind": scope, "name": metadata["name"]},
                    "subjects": [
                        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
                    ],
                }
            )
    return objects


@contextlib.contextmanager
def _installed(cluster: Cluster, olm: Olm, package: str) -> Iterator[dict[str, Any]]:
    """The package's CSV installed as an InstallPlan would, and Succeeded; removed after."""
    namespace = olm.namespace
    csv = _csv(package)
    crds = [m for m in _manifests(package) if m["kind"] == "CustomResourceDefinition"]
    objects = [*crds, *_install_plan_objects(csv, namespace), csv]
    cluster.kubectl(
        *("apply", "--server-side", "--force-conflicts", "-n", namespace, "-f", "-"),
        stdin=yaml.safe_dump_all(objects),
    )
    name = csv["metadata"]["name"]
    try:
        wait_until(
            lambda: olm.phase(cluster, name),
            lambda phase: phase == "Succeeded",
            timeout=120,
            what=f"CSV {name} to reach Succeeded",
        )
        yield csv
    finally:
        cluster.kubectl("delete", "csv", name, "-n", namespace, "--wait=true")
        for obj in objects:
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                cluster.kubectl("delete", _resource_name(obj), "--ignore-not-found")


def _pods(cluster: Cluster, namespace: str, csv: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of the CSV's Deployment."""
    (deployment,) = csv["spec"]["install"]["spec"]["deployments"]
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{key}={value}" for key, value in labels.items())
    pods: list[dict[str, Any]] = yaml.safe_load(
        cluster.kubectl("get", "pods", "-n", namespace, "-o", "yaml", "-l", selector)
    )["items"]
    return pods


@pytest.mark.parametrize("package", PACKAGES)
def test_olm_installs_the_csv(cluster: Cluster, olm_operator: Olm, package: str) -> None:
    """OLM deploys the CSV (kwok runs the pod) and it reaches Succeeded; the pod serves OLM's
    target namespace through OPSUITE_NAMESPACE."""
    namespace = olm_operator.namespace
    with _installed(cluster, olm_operator, package) as csv:
        pods = _pods(cluster, namespace, csv)
        assert pods, "OLM's Deployment has no pod"
        for pod in pods:
            assert pod["metadata"]["annotations"]["olm.targetNamespaces"] == namespace
            env = pod["spec"]["containers"][0]["env"]
            assert TARGET_NAMESPACES_ENV["name"] in [var["name"] for var in env]


def test_the_olm_installed_pod_debugger_fails_closed(
    cluster: Cluster, olm_operator: Olm, api: client.ApiClient, tmp_path: Path
) -> None:
    """OLM cannot install admission policies, and the pod OLM deploys does not opt out of
    needing them (#17, item 2). The pod's own command line and environment, run as a local
    process with the identity and RBAC OLM gave it (kwok does not run it), inject nothing: the
    PodDebugger reports PolicyMissing and the pod gets no ephemeral container."""
    namespace = olm_operator.namespace
    with _installed(cluster, olm_operator, "pod-debugger-operator") as csv:
        (pod,) = _pods(cluster, namespace, csv)
        (container,) = pod["spec"]["containers"]
        args = [a for a in container["args"] if not a.startswith(("--metrics", "--health"))]
        env = {var["name"]: var.get("value", "") for var in container["env"]}
        assert not [a for a in args if a.startswith(("--allow-without", "--allow-sysadmin"))]
        assert not [v for v in env if v.startswith(("OPSUITE_ALLOW_",))], env
        env.update(
            {
                "KUBECONFIG": str(
                    token_kubeconfig(cluster, api, namespace, pod["spec"]["serviceAccountName"])
                ),
                "OPSUITE_NAMESPACE": pod["metadata"]["annotations"]["olm.targetNamespaces"],
                "POD_NAME": pod["metadata"]["name"],
                "POD_NAMESPACE": namespace,
                "PATH": "/usr/bin:/bin",
            }
        )
        operator = OperatorProcess(
            "pod-debugger-operator", args, tmp_path / "olm-pod-debugger.log", env
        ).start()
        debuggers = Debuggers(api)
        try:
            operator.wait_ready(timeout=60)
            debuggers.run_pod(namespace, "web", {"app": "web"})
            debuggers.create(namespace, debugger_manifest("shell", {"app": "web"}))
            obj = debuggers.wait(
                namespace,
                "shell",
                lambda o: condition(o, "Ready").get("reason") == "PolicyMissing",
                "PolicyMissing",
            )
            assert "--allow-without-admission-policy" in condition(obj, "Ready")["message"]
            time.sleep(2)
            assert ephemeral(debuggers.pod(namespace, "web")) == []
        finally:
            debuggers.cleanup()
            assert operator.stop() == 0, operator.log_tail()
