"""The Helm charts on a real API server: lint, render, install, upgrade, uninstall, and RBAC
that is exactly enough (an operator missing one rule of its chart fails)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import (
    CHARTS,
    KUBE_VERSION,
    PODDEBUGGER_CHART,
    RELEASE_NAMESPACE,
    chart_dir,
    helm,
    lease_rules,
    requests_by,
    serves_mutating_policies,
    token_kubeconfig,
)
from e2e.cluster import Cluster, wait_until
from e2e.operators import OperatorProcess, operator_env
from e2e.podset_support import PodSets, condition, install_crd, podset
from opsuite_packaging.chart import ChartSpec, metrics_auth_rules
from podset_manifests import CHART_SPEC as PODSET_CHART

SPECS = list(CHARTS.values())
CHART_IDS = [s.name for s in SPECS]


def non_default_values(spec: ChartSpec, namespaces: list[str]) -> dict[str, Any]:
    """Values exercising every optional part: HA, namespaced RBAC, ServiceMonitor, dashboard,
    NetworkPolicy, and the options of the pods."""
    values: dict[str, Any] = {
        "replicaCount": 2,
        "watchNamespaces": namespaces,
        "image": {"digest": "sha256:" + "0" * 64},
        "metrics": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
            "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
        },
        "dashboard": {"enabled": True},
        "extraArgs": ["--watch-timeout=30"],
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
        "podAnnotations": {"example.com/a": "b"},
        "podLabels": {"team": "platform"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "serviceAccount": {"annotations": {"example.com/role": "operator"}},
        "commonLabels": {"example.com/team": "platform"},
        "extraVolumes": [{"name": "ca", "configMap": {"name": "corporate-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corporate"}],
        "probes": {"startup": {"failureThreshold": 60}, "liveness": {"timeoutSeconds": 3}},
        "terminationGracePeriodSeconds": 45,
        "podDisruptionBudget": {"maxUnavailable": "50%"},
        "networkPolicy": {"enabled": True},
    }
    if spec is PODDEBUGGER_CHART:
        values["imageAllowlist"] = {"prefixes": ["registry.example.com/debug/", "busybox"]}
    return values


def render(cluster: Cluster, spec: ChartSpec, namespace: str, values: dict[str, Any]) -> str:
    return helm(
        cluster,
        "template",
        "e2e",
        str(chart_dir(spec)),
        "--namespace",
        namespace,
        "--kube-version",
        KUBE_VERSION,
        "--include-crds",
        values=values,
    )


@pytest.fixture
def watched(api: client.ApiClient, namespace: str) -> Iterator[list[str]]:
    """Two more namespaces for watchNamespaces, deleted afterwards."""
    core = client.CoreV1Api(api)
    names = [f"{namespace[:50]}-w{i}" for i in (1, 2)]
    for name in names:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield names
    for name in names:
        core.delete_namespace(name, propagation_policy="Background")


@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
def test_helm_lint_strict(cluster: Cluster, spec: ChartSpec) -> None:
    """Default values and the non-default set both pass `helm lint --strict`."""
    for values in ({}, non_default_values(spec, ["a", "b"])):
        out = helm(cluster, "lint", "--strict", str(chart_dir(spec)), values=values)
        assert "1 chart(s) linted, 0 chart(s) failed" in out, out


@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
def test_values_schema_rejects_unknown_and_invalid_values(
    cluster: Cluster, spec: ChartSpec
) -> None:
    for values, message in (
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"metrics": {"port": "8080"}}, "/metrics/port"),
        ({"watchNamespaces": ["Not_A_Namespace"]}, "/watchNamespaces/0"),
        ({"image": {"digest": "latest"}}, "/image/digest"),
    ):
        with pytest.raises(RuntimeError) as failure:
            render(cluster, spec, "default", values)
        assert message in str(failure.value), failure.value


@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
@pytest.mark.parametrize("variant", ["default", "non-default"])
def test_rendered_objects_are_accepted_by_the_api_server(
    cluster: Cluster,
    service_monitor_crd: None,
    namespace: str,
    watched: list[str],
    spec: ChartSpec,
    variant: str,
) -> None:
    """Every object `helm template` renders passes `kubectl apply --dry-run=server`."""
    values = {} if variant == "default" else non_default_values(spec, watched)
    manifest = render(cluster, spec, namespace, values)
    objects = [d for d in yaml.safe_load_all(manifest) if d]
    kinds = {d["kind"] for d in objects}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding", "Service"} <= kinds
    if variant == "non-default":
        extras = {"PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "ConfigMap"}
        assert extras | {"NetworkPolicy"} <= kinds
        roles = [d for d in objects if d["kind"] == "Role"]
        assert {r["metadata"]["namespace"] for r in roles} == {*watched, namespace}
    # The `helm test` Pod's ServiceAccount must exist for the Pod to be admitted (Helm creates it
    # first, by hook weight); a dry run creates nothing, so it is created for real first.
    accounts = [d for d in objects if d["kind"] == "ServiceAccount" and _is_test_hook(d)]
    assert accounts, "the chart's helm test hook has its own ServiceAccount"
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(accounts))
    out = cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=manifest)
    assert out.count("(server dry run)") == len(objects), out


def _is_test_hook(obj: dict[str, Any]) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    return bool(annotations.get("helm.sh/hook") == "test")


def _cluster_scoped(api: client.ApiClient, release: str) -> dict[str, list[str]]:
    """Cluster-scoped objects labelled with the release."""
    selector = f"app.kubernetes.io/instance={release}"
    rbac = client.RbacAuthorizationV1Api(api)
    adm = client.AdmissionregistrationV1Api(api)
    listings = [
        ("ClusterRole", rbac.list_cluster_role),
        ("ClusterRoleBinding", rbac.list_cluster_role_binding),
        ("ValidatingAdmissionPolicy", adm.list_validating_admission_policy),
        ("ValidatingAdmissionPolicyBinding", adm.list_validating_admission_policy_binding),
    ]
    if serves_mutating_policies(api):
        listings += [
            ("MutatingAdmissionPolicy", adm.list_mutating_admission_policy),
            ("MutatingAdmissionPolicyBinding", adm.list_mutating_admission_policy_binding),
        ]
    return {
        kind: sorted(o.metadata.name for o in listing(label_selector=selector).items)
        for kind, listing in listings
    }


@pytest.mark.local_operators("waits for the chart's pods, whose default image is not pulled here")
@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
def test_install_upgrade_uninstall(
    cluster: Cluster, api: client.ApiClient, namespace: str, watched: list[str], spec: ChartSpec
) -> None:
    """helm install into a namespace enforcing Pod Security "restricted" (the pod is admitted
    and goes Ready on kwok), upgrade to HA + watchNamespaces, uninstall: only the CRD stays."""
    release = f"e2e-{uuid.uuid4().hex[:6]}"
    fullname = f"{release}-{spec.name}"
    apps = client.AppsV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    client.CoreV1Api(api).patch_namespace(namespace, {"metadata": {"labels": restricted}})

    def deploy(verb: str, values: dict[str, Any]) -> None:
        chart = str(chart_dir(spec))
        helm(
            cluster,
            verb,
            release,
            chart,
            "-n",
            namespace,
            "--wait",
            "--timeout=120s",
            values=values,
        )

    deploy("install", {})
    try:
        deployment = apps.read_namespaced_deployment(fullname, namespace)
        assert deployment.status.ready_replicas == 1
        container = deployment.spec.template.spec.containers[0]
        assert "--leader-elect=true" in container.args
        assert container.security_context.read_only_root_filesystem is True
        role = rbac.read_cluster_role(fullname)
        assert [r.to_dict()["resources"] for r in role.rules] == [
            list(r.resources)
            for r in spec.namespaced_rules + spec.cluster_rules + metrics_auth_rules(spec)
        ]
        installed = _cluster_scoped(api, release)
        policies = len(installed["ValidatingAdmissionPolicy"])
        # ConfigMapSync: authorization of each kind (ConfigMapSync, SecretSync). PodDebugger:
        # authorization, privileged profile, image allowlist, its writers.
        assert policies == {"podset-operator": 1, "configmapsync-operator": 2}.get(spec.name, 4)
        if serves_mutating_policies(api):  # the requester policies
            recorders = len(installed["MutatingAdmissionPolicy"])
            assert recorders == 1

        deploy("upgrade", {"replicaCount": 2, "watchNamespaces": watched})
        # helm's --wait accepts a rolling Deployment within its maxUnavailable; wait for both.
        deployment = wait_until(
            lambda: apps.read_namespaced_deployment(fullname, namespace),
            lambda d: d.status.ready_replicas == 2 and d.status.updated_replicas == 2,
            timeout=60,
            what="2 ready replicas of the upgraded Deployment",
        )
        args = deployment.spec.template.spec.containers[0].args
        assert [a for a in args if a.startswith("--namespace=")] == [
            f"--namespace={ns}" for ns in watched
        ]
        client.PolicyV1Api(api).read_namespaced_pod_disruption_budget(fullname, namespace)
        for ns in watched:
            rbac.read_namespaced_role(fullname, ns)
        cluster_roles = _cluster_scoped(api, release)["ClusterRole"]
        users = [f"{fullname}-{role}" for role in ("edit", "metrics-reader", "view")]
        # Secure metrics' reviews are cluster-scoped: the operator keeps a ClusterRole.
        assert cluster_roles == sorted([fullname, *users])
    finally:
        helm(cluster, "uninstall", release, "-n", namespace, "--wait")
    assert _cluster_scoped(api, release) == {k: [] for k in installed}
    client.ApiextensionsV1Api(api).read_custom_resource_definition(spec.crd_name)


@pytest.mark.local_operators("installs a second release of each chart beside the cluster's")
@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
def test_a_release_named_like_one_in_another_namespace_is_refused(
    cluster: Cluster, api: client.ApiClient, namespace: str, watched: list[str], spec: ChartSpec
) -> None:
    """Two releases named alike in two namespaces would share their cluster-scoped names: the
    second install is refused before anything is created, naming the release that has them."""
    release = f"e2e-{uuid.uuid4().hex[:6]}"
    other = watched[0]
    helm(cluster, "install", release, str(chart_dir(spec)), "-n", namespace)
    try:
        with pytest.raises(RuntimeError) as refused:
            helm(cluster, "install", release, str(chart_dir(spec)), "-n", other)
        assert f"belongs to release {release} in namespace {namespace}" in str(refused.value)
        assert "fullnameOverride" in str(refused.value)
        deployments = client.AppsV1Api(api).list_namespaced_deployment(other).items
        assert not deployments, "nothing of the refused release was created"
        helm(cluster, "upgrade", release, str(chart_dir(spec)), "-n", namespace)  # its own: fine
    finally:
        helm(cluster, "uninstall", release, "-n", namespace, "--wait")


def test_installed_image_allowlist_policy_denies_other_images(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    """The allowlist as a chart value reaches the policy's parameter (a DebugImagePolicy) and
    the operator's flag; the freshly installed policy denies another image."""
    release = f"e2e-{uuid.uuid4().hex[:6]}"
    prefixes = ["registry.example.com/debug/"]
    helm(
        cluster,
        "install",
        release,
        str(chart_dir(PODDEBUGGER_CHART)),
        "-n",
        namespace,
        values={"imageAllowlist": {"prefixes": prefixes}, "admissionPolicy": {"enabled": False}},
    )
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "shell"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "image": "docker.io/library/alpine:3"},
    }
    try:
        args = (
            client.AppsV1Api(api)
            .read_namespaced_deployment(f"{release}-{PODDEBUGGER_CHART.name}", namespace)
            .spec.template.spec.containers[0]
            .args
        )
        assert "--allowed-image-prefix=registry.example.com/debug/" in args

        def denial() -> str:
            try:
                custom.create_namespaced_custom_object(
                    "debug.opsuite.dev", "v1alpha1", namespace, "poddebuggers", body
                )
            except ApiException as exc:
                return str(exc.body)
            custom.delete_namespaced_custom_object(
                "debug.opsuite.dev", "v1alpha1", namespace, "poddebuggers", "shell"
            )
            return "admitted"

        text = wait_until(denial, lambda t: "is not allowed" in t, timeout=60, what="a denial")
        assert "image docker.io/library/alpine:3 is not allowed" in text, text
        body["spec"]["image"] = "registry.example.com/debug/tools:1"
        custom.create_namespaced_custom_object(
            "debug.opsuite.dev", "v1alpha1", namespace, "poddebuggers", body
        )
    finally:
        helm(cluster, "uninstall", release, "-n", namespace, "--wait")


def _without_pod_creation(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def reduced(rule: dict[str, Any]) -> dict[str, Any]:
        return {**rule, "verbs": [v for v in rule["verbs"] if v != "create"]}

    return [reduced(r) if r["resources"] == ["pods"] else r for r in rules]


def _without_finalizers(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rules if not any(x.endswith("/finalizers") for x in r["resources"])]


@pytest.mark.local_operators("runs a podset-operator process beside the cluster's")
@pytest.mark.parametrize(
    ("reduce", "by_rbac"),
    [(_without_pod_creation, True), (_without_finalizers, False)],
    ids=["create-pods", "podsets-finalizers"],
)
def test_podset_operator_without_one_rule_of_its_chart_fails_and_recovers_with_it(
    cluster: Cluster,
    api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    reduce: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    by_rbac: bool,
) -> None:
    """Least privilege, the other way round: remove a rule from the chart's Role and the
    operator, running as the chart's ServiceAccount, cannot do its job (Degraded, 403 on pods
    create in the audit log); put the rule back and it converges. `create pods` is refused by
    the authorizer; without `update podsets/finalizers` the API server's
    OwnerReferencesPermissionEnforcement plugin (on in the local plane, as in OpenShift)
    refuses a pod that names its PodSet with blockOwnerDeletion (#31, item 10)."""
    install_crd(cluster)
    release_ns = f"{namespace[:50]}-rel"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=release_ns))
    )
    release = "lp"
    fullname = f"{release}-{PODSET_CHART.name}"
    helm(
        cluster,
        "install",
        release,
        str(chart_dir(PODSET_CHART)),
        "-n",
        release_ns,
        "--skip-crds",
        values={"watchNamespaces": [namespace], "metrics": {"enabled": False}},
    )
    rbac = client.RbacAuthorizationV1Api(api)
    role = rbac.read_namespaced_role(fullname, namespace).to_dict()
    full_rules = role["rules"]
    reduced = reduce(full_rules)
    assert reduced != full_rules
    rbac.patch_namespaced_role(fullname, namespace, {"rules": _api_rules(reduced)})
    started = datetime.now(UTC)
    kubeconfig = token_kubeconfig(cluster, api, release_ns, fullname)
    env = operator_env(cluster, "podset-operator", POD_NAME="least-privilege")
    env["KUBECONFIG"] = str(kubeconfig)
    proc = OperatorProcess(
        "podset-operator",
        [
            f"--namespace={namespace}",
            "--leader-elect",
            f"--leader-election-namespace={release_ns}",
            f"--leader-election-id={fullname}",
        ],
        tmp_path / "podset-operator.log",
        env,
    ).start()
    podsets = PodSets(api, namespace)
    try:
        proc.wait_ready()
        podsets.create(podset("web", 2))
        degraded = wait_until(
            lambda: condition(podsets.get("web"), "Degraded"),
            lambda c: c.get("status") == "True",
            timeout=60,
            what="Degraded=True on the PodSet",
        )
        assert "forbidden" in degraded["message"].lower(), degraded
        assert podsets.pods("app=web") == []
        user = f"system:serviceaccount:{release_ns}:{fullname}"
        assert cluster.audit_log is not None
        denied = wait_until(
            lambda: [
                r
                for r in requests_by(cluster.audit_log, user, started)
                if r.code == 403
                and r.denied_by_rbac is by_rbac
                and (r.resource, r.verb) == ("pods", "create")
            ],
            bool,
            timeout=30,
            what="403 on pods create in the audit log",
        )
        assert all(r.namespace == namespace for r in denied)

        rbac.patch_namespaced_role(fullname, namespace, {"rules": _api_rules(full_rules)})
        podsets.wait_running("app=web", 2)
        wait_until(
            lambda: condition(podsets.get("web"), "Degraded"),
            lambda c: c.get("status") == "False",
            timeout=60,
            what="Degraded=False once the rule is back",
        )
        assert lease_rules(PODSET_CHART, release)[1].resource_names == (fullname,)
    finally:
        proc.stop()
        helm(cluster, "uninstall", release, "-n", release_ns, "--wait")
        client.CoreV1Api(api).delete_namespace(release_ns, propagation_policy="Background")


@pytest.mark.local_operators("runs operator processes as the chart's ServiceAccount")
@pytest.mark.parametrize("spec", SPECS, ids=CHART_IDS)
def test_two_replicas_elect_a_leader_with_the_charts_lease_and_identity(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path, spec: ChartSpec
) -> None:
    """Run as the chart runs it: two replicas, each as the chart's ServiceAccount, campaign for
    the release's Lease; one leads, the standby watches the Lease and takes over at once when
    the leader stops (it releases the Lease)."""
    if spec.command not in cluster.operator_kubeconfigs:
        pytest.skip("the operators run as admin (E2E_OPERATOR_IDENTITY=admin)")
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(chart_dir(spec) / "crds")
    )
    leases = client.CoordinationV1Api(api)

    def holder() -> str:
        try:
            lease = leases.read_namespaced_lease(spec.name, RELEASE_NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return ""
            raise
        return str(lease.spec.holder_identity or "")

    replicas = {
        name: OperatorProcess(
            spec.command,
            [
                f"--namespace={namespace}",
                "--leader-elect",
                f"--leader-election-namespace={RELEASE_NAMESPACE}",
                f"--leader-election-id={spec.name}",
            ],
            tmp_path / f"{name}.log",
            operator_env(cluster, spec.command, POD_NAME=name),
        ).start()
        for name in ("replica-0", "replica-1")
    }
    try:
        leader = wait_until(holder, lambda h: h in replicas, timeout=60, what="a leader")
        for proc in replicas.values():
            proc.wait_ready()
        standby = next(n for n in replicas if n != leader)
        assert replicas[leader].stop() == 0, replicas[leader].log_tail()
        wait_until(holder, lambda h: h == standby, timeout=10, what=f"{standby} leading")
    finally:
        for proc in replicas.values():
            proc.stop()
        with contextlib.suppress(ApiException):
            leases.delete_namespaced_lease(spec.name, RELEASE_NAMESPACE)


def _api_rules(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rules from the client's to_dict() (snake_case, None fields) in the API's spelling."""
    keys = {"api_groups": "apiGroups", "resource_names": "resourceNames"}
    return [{keys.get(k, k): v for k, v in r.items() if v is not None} for r in rules]
