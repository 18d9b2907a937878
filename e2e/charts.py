"""The Helm charts in e2e: helm itself, releases, and operators running as a chart's identity.

By default every operator process the suite starts authenticates as its chart's ServiceAccount
(a token from the TokenRequest API), so that each e2e test of an operator also proves the
chart's RBAC is enough; ``E2E_OPERATOR_IDENTITY=admin`` runs them with the admin kubeconfig
instead. The charts are installed once per session into :data:`RELEASE_NAMESPACE`, with their
cluster-wide admission policies off (the policy tests install their own copies) and no users'
roles (e2e/test_user_roles.py applies its own).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from e2e.cluster import ROOT, Cluster, audit_events
from opsuite_packaging.chart import LEADER_ELECTION_RULES, LEASE_PLACEHOLDER, ChartSpec, PolicyRule
from opsuite_packaging.operators import OPERATORS
from poddebugger_manifests import CHART_SPEC as PODDEBUGGER_CHART

RELEASE_NAMESPACE = "opsuite-system"
CHARTS: dict[str, ChartSpec] = {
    spec.command: spec
    for spec in (importlib.import_module(op.manifests).CHART_SPEC for op in OPERATORS)
}
"""Each operator's chart (operators/operators.toml), by console script."""
KUBE_VERSION = "1.36.3"
"""The Kubernetes version `helm template` renders for (the local plane's)."""
IDENTITY_DIR = ROOT / ".local" / "e2e-identities"
POLICIES_OFF: dict[str, dict[str, Any]] = {
    spec.name: {"admissionPolicy": {"enabled": False}}
    | ({"imageAllowlist": {"enabled": False}} if spec is PODDEBUGGER_CHART else {})
    for spec in CHARTS.values()
}


def helm_binary() -> str:
    """helm from PATH, else the one `make tools` builds."""
    return shutil.which("helm") or str(ROOT / ".local" / "bin" / "helm")


def helm(cluster: Cluster, *args: str, values: Mapping[str, Any] | None = None) -> str:
    """Run helm against the cluster (``values`` as a values file); stdout, or raise with stderr."""
    command = [helm_binary(), "--kubeconfig", str(cluster.kubeconfig), *args]
    stdin = None
    if values is not None:
        command += ["--values", "-"]
        stdin = yaml.safe_dump(dict(values))
    out = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return out.stdout


def chart_dir(spec: ChartSpec) -> Path:
    return ROOT / "charts" / spec.name


def lease_rules(spec: ChartSpec, release: str) -> tuple[PolicyRule, ...]:
    """The leader-election rules as the chart renders them for ``release`` (its full name)."""
    fullname = release if spec.name in release else f"{release}-{spec.name}"
    return tuple(
        PolicyRule(
            r.api_groups,
            r.resources,
            r.verbs,
            tuple(fullname if n == LEASE_PLACEHOLDER else n for n in r.resource_names),
        )
        for r in LEADER_ELECTION_RULES
    )


def service_account_user(spec: ChartSpec, namespace: str = RELEASE_NAMESPACE) -> str:
    """The audit log's user name of the chart's ServiceAccount (release named like the chart)."""
    return f"system:serviceaccount:{namespace}:{spec.name}"


def token_kubeconfig(cluster: Cluster, api: client.ApiClient, namespace: str, sa: str) -> Path:
    """A kubeconfig authenticating as ServiceAccount ``namespace/sa`` (a 6-hour token)."""
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            sa, namespace, {"spec": {"expirationSeconds": 6 * 3600}}
        )
        .status.token
    )
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cluster_entry = admin["clusters"][0]["cluster"]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster_entry}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": "e2e", "user": sa}}],
        "current-context": sa,
    }
    IDENTITY_DIR.mkdir(parents=True, exist_ok=True)
    path = IDENTITY_DIR / f"{namespace}-{sa}.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    path.chmod(0o600)
    return path


def optional_rules_on(spec: ChartSpec) -> dict[str, Any]:
    """Values turning on every optional rule of ``spec`` (ConfigMapSync's ``secrets.enabled``),
    so the e2e identity may do all its operator does with any flag; tests of a flag off check
    from the audit log that the operator asked for none of it."""
    values: dict[str, Any] = {}
    for optional in spec.optional_rules:
        *path, leaf = optional.value.split(".")
        node = values
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = True
    return values


def install_identities(cluster: Cluster, api: client.ApiClient) -> None:
    """Install each chart (policies and users' roles off) and give its operator the chart's
    ServiceAccount."""
    if os.environ.get("E2E_OPERATOR_IDENTITY", "chart") == "admin":
        return
    for command, spec in CHARTS.items():
        helm(
            cluster,
            "upgrade",
            "--install",
            spec.name,
            str(chart_dir(spec)),
            "--namespace",
            RELEASE_NAMESPACE,
            "--create-namespace",
            "--skip-crds",
            # Not the values of the release there (another checkout's, on a shared cluster):
            # with no values of its own, helm upgrade would reuse them.
            "--reset-values",
            # Nor users' roles: aggregated into the built-in ones, they would change what every
            # view or edit user of the cluster may do for the whole session.
            values={
                **POLICIES_OFF.get(spec.name, {}),
                **optional_rules_on(spec),
                "userRoles": {"create": False},
            },
        )
        cluster.operator_kubeconfigs[command] = token_kubeconfig(
            cluster, api, RELEASE_NAMESPACE, spec.name
        )


@dataclass(frozen=True)
class Request:
    """One request of the audit log, reduced to what RBAC decides on."""

    group: str
    resource: str
    verb: str
    namespace: str
    name: str
    code: int
    denied_by_rbac: bool
    """The authorizer refused it (a 403 can also come from admission, e.g. Pod Security)."""
    initial_stream: bool = False
    """A watch that starts with the objects present (``sendInitialEvents``): a streamed list."""


def requests_by(audit_log: Path, user: str, since: datetime) -> Iterator[Request]:
    """Completed requests of ``user`` received at or after ``since`` (resource requests only)."""
    stamp = since.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # the audit log's MicroTime format (UTC)
    for event in audit_events(audit_log, needle=json.dumps(user)):
        if event.get("stage") != "ResponseComplete" or event["user"]["username"] != user:
            continue
        if event["requestReceivedTimestamp"] < stamp or "objectRef" not in event:
            continue
        ref = event["objectRef"]
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        yield Request(
            ref.get("apiGroup", ""),
            resource,
            event["verb"],
            ref.get("namespace", ""),
            ref.get("name", ""),
            int(event.get("responseStatus", {}).get("code", 0)),
            event.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid",
            "sendInitialEvents=true" in event.get("requestURI", ""),
        )


def unused_grants(
    rules: tuple[PolicyRule, ...], requests: list[Request]
) -> list[tuple[str, str, str]]:
    """(group, resource, verb) granted by ``rules`` that no request used. A streamed
    initial list uses ``list`` too: the operators list in pages instead when the API server
    refuses or cuts such a stream (opsuite_common.kopfwatch.listing), so the grant stays needed. A
    grant admission checks (``checked_on``) is used by each request it was checked on."""
    used = {(r.group, r.resource, r.verb) for r in requests}
    used |= {(r.group, r.resource, "list") for r in requests if r.initial_stream}
    used |= {g for rule in rules if rule.checked_on in used for g in rule.grants()}
    return sorted({g for rule in rules for g in rule.grants() if g not in used})


def serves_mutating_policies(api: client.ApiClient) -> bool:
    """Whether the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
    (1.36 and later), where the charts render their requester policies."""
    resources = client.AdmissionregistrationV1Api(api).get_api_resources().resources
    return any(r.kind == "MutatingAdmissionPolicy" for r in resources)
