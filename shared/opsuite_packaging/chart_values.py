"""The Helm chart values every operator chart shares, as a pydantic model.

The model is the single source of the chart's ``values.yaml`` (defaults and comments),
``values.schema.json`` (unknown keys rejected) and the values table of the chart's README; see
:mod:`opsuite_packaging.chart`. An operator with more settings subclasses :class:`ChartValues`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from opsuite_common.kube_model import KubeModel

NamespaceName = Annotated[str, Field(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
IMAGE_REGISTRY = "ghcr.io/opsuite"
"""Where the release workflow publishes the operator images (``<registry>/<chart name>``)."""
CHART_REPOSITORY = f"oci://{IMAGE_REGISTRY}/charts"
"""Where the release workflow publishes the charts (OCI)."""


class ImageValues(KubeModel):
    """The operator's container image."""

    repository: str = Field(min_length=1)
    """Image repository."""
    tag: str = ""
    """Image tag; empty means the chart's appVersion."""
    digest: str = Field("", pattern=r"^(sha256:[a-f0-9]{64})?$")
    """Image digest (sha256:...); when set, the image is pulled by digest and the tag is ignored."""
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    """Image pull policy."""


def published_image(chart: str) -> ImageValues:
    """The image the release workflow publishes for ``chart`` (``<IMAGE_REGISTRY>/<chart>``)."""
    return ImageValues(repository=f"{IMAGE_REGISTRY}/{chart}")


class NameReference(KubeModel):
    """A reference to an object by name, in the release namespace."""

    name: str = Field(min_length=1)
    """Name of the object."""


class ServiceAccountValues(KubeModel):
    """The ServiceAccount the operator runs as."""

    create: bool = True
    """Create the ServiceAccount."""
    name: str = ""
    """Its name; empty means the release's full name. Required when create is false."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations on the ServiceAccount (e.g. for workload identity)."""


class RbacValues(KubeModel):
    """RBAC objects granting the operator exactly the API calls its code makes."""

    create: bool = True
    """Create the (Cluster)Roles and bindings; when false, grant the same rules yourself."""


Duration = Annotated[str, Field(pattern=r"^([0-9]+(ms|s|m|h))+$")]


class ServiceMonitorValues(KubeModel):
    """A prometheus-operator ServiceMonitor scraping the metrics Service."""

    enabled: bool = False
    """Create the ServiceMonitor (needs the monitoring.coreos.com CRDs)."""
    namespace: str = ""
    """Namespace of the ServiceMonitor (and, with metrics.secure, of its scraper's
    ServiceAccount and token); empty: the release's."""
    interval: Duration = "30s"
    """Scrape interval."""
    scrape_timeout: Duration | None = None
    """Scrape timeout, at most the interval; unset: Prometheus' default."""
    honor_labels: bool = True
    """Keep the labels the operator puts on its metrics (the namespace and name of a custom
    resource) rather than have Prometheus rename them exported_namespace and so on."""
    relabelings: list[dict[str, Any]] = Field(default_factory=list)
    """The endpoint's relabelings (RelabelConfig objects), applied before the scrape."""
    metric_relabelings: list[dict[str, Any]] = Field(default_factory=list)
    """The endpoint's metricRelabelings, applied to the scraped samples."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels, e.g. the one your Prometheus selects ServiceMonitors by."""
    tls_config: dict[str, Any] = Field(default_factory=dict)
    """The endpoint's tlsConfig when metrics.secure is on, e.g. the CA of metrics.certSecret
    ({ca: {secret: {name: ..., key: ca.crt}}, serverName: ...}); empty means insecureSkipVerify
    (the operator's certificate is self-signed). Prometheus authenticates with the token of
    the chart's <fullname>-metrics-scraper ServiceAccount, bound to the metrics-reader
    ClusterRole (the endpoint's authorization, no bearerTokenFile)."""


class PrometheusRuleValues(KubeModel):
    """A prometheus-operator PrometheusRule with the operator's alerts: no pod up and scraped,
    no leader, a watch silent too long, reconcile errors, a deep or slow work queue."""

    enabled: bool = False
    """Create the PrometheusRule (needs the monitoring.coreos.com CRDs)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels, e.g. the one your Prometheus selects rules by."""
    workqueue_depth: int = Field(100, ge=1)
    """Keys in a work queue, for 15 minutes, that raise the WorkqueueDepth alert."""
    workqueue_latency_seconds: int = Field(60, ge=1)
    """The 99th percentile of a key's wait in a work queue, for 15 minutes, that raises the
    WorkqueueLatency alert."""


class MetricsValues(KubeModel):
    """The Prometheus /metrics endpoint."""

    enabled: bool = True
    """Serve /metrics and create the metrics Service."""
    port: int = Field(8080, ge=1024, le=65535)
    """Container and Service port of /metrics."""
    secure: bool = True
    """Serve /metrics over HTTPS, each request authenticated (TokenReview) and authorized
    (SubjectAccessReview: get on the non-resource URL /metrics, which the chart's
    <fullname>-metrics-reader ClusterRole grants). The operator's ClusterRole then also grants
    create on tokenreviews and subjectaccessreviews. False serves plain, open HTTP."""
    cert_secret: str = ""
    """A kubernetes.io/tls Secret in the release namespace (e.g. cert-manager's) holding the
    serving certificate (tls.crt, tls.key) when metrics.secure is on; empty means the operator
    makes a self-signed certificate at start-up. A renewal is picked up without a restart."""
    service_monitor: ServiceMonitorValues = Field(default_factory=ServiceMonitorValues)
    """Optional ServiceMonitor."""
    prometheus_rule: PrometheusRuleValues = Field(default_factory=PrometheusRuleValues)
    """Optional PrometheusRule with the operator's alerts."""


class UserRolesValues(KubeModel):
    """ClusterRoles for the users of the custom resources, aggregated into Kubernetes' built-in
    roles (cert-manager's pattern): <fullname>-view (get, list, watch) into view, edit and admin;
    <fullname>-edit (create, update, patch, delete) into edit and admin."""

    create: bool = True
    """Create the two ClusterRoles."""
    aggregate_to_edit: bool = True
    """Aggregate <fullname>-edit into the built-in edit and admin roles; when false it is only
    there to be bound to whom you choose."""


class DashboardValues(KubeModel):
    """The opsuite Grafana dashboard, shipped as a ConfigMap for Grafana's dashboard sidecar."""

    enabled: bool = False
    """Create the dashboard ConfigMap."""
    labels: dict[str, str] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    """Labels the Grafana sidecar selects dashboards by."""


class ProbeValues(KubeModel):
    """The timing of one of the operator's probes; what it asks and where is the operator's."""

    initial_delay_seconds: int = Field(0, ge=0)
    """Seconds before the first probe."""
    period_seconds: int = Field(10, ge=1)
    """Seconds between probes."""
    timeout_seconds: int = Field(1, ge=1)
    """Seconds a probe may take."""
    failure_threshold: int = Field(3, ge=1)
    """Failed probes in a row that count as a failure."""


class ProbesValues(KubeModel):
    """The operator's probes: /healthz (the watches are alive) for startup and liveness,
    /readyz (caches synced, or standing by) for readiness."""

    startup: ProbeValues = Field(
        default_factory=lambda: ProbeValues(period_seconds=2, failure_threshold=30)
    )
    """Startup probe: periodSeconds times failureThreshold is how long a start may take."""
    liveness: ProbeValues = Field(default_factory=ProbeValues)
    """Liveness probe: the kubelet restarts the operator when it fails."""
    readiness: ProbeValues = Field(default_factory=lambda: ProbeValues(period_seconds=5))
    """Readiness probe."""


IntOrPercent = int | Annotated[str, Field(pattern=r"^[0-9]+%$")]


class PodDisruptionBudgetValues(KubeModel):
    """The PodDisruptionBudget of the operator pods, made when replicaCount is 2 or more."""

    enabled: bool = True
    """Make it (with replicaCount 2 or more)."""
    min_available: IntOrPercent = 1
    """Pods that must stay available during a voluntary disruption (a number or a percentage)."""
    max_unavailable: IntOrPercent | None = None
    """Pods that may be unavailable instead; when set, used in place of minAvailable."""


class NetworkPolicyValues(KubeModel):
    """A NetworkPolicy on the operator pods that admits only the metrics scrapers (kubebuilder's
    network-policy): the operator serves nothing else but its probes, which the kubelet sends
    from the node. Enforced only where the cluster's network plugin enforces NetworkPolicy."""

    enabled: bool = False
    """Create the NetworkPolicy."""
    metrics_from: list[dict[str, Any]] = Field(
        default_factory=lambda: [{"namespaceSelector": {"matchLabels": {"metrics": "enabled"}}}]
    )
    """Who may reach /metrics (NetworkPolicyPeer objects); the default, kubebuilder's: pods in
    namespaces labelled metrics=enabled."""


class ChartValues(KubeModel):
    """Values of an opsuite operator chart."""

    replica_count: int = Field(1, ge=1, le=10)
    """Operator pods. One leads (Lease), the others stand by; 2 or more for HA, which also
    creates a PodDisruptionBudget (podDisruptionBudget) and, unless affinity is set, prefers
    to put them on different nodes."""
    image: ImageValues
    """The operator's container image."""
    image_pull_secrets: list[NameReference] = Field(default_factory=list)
    """Secrets for pulling the image."""
    name_override: str = ""
    """Replaces the chart name in object names."""
    fullname_override: str = ""
    """Replaces the release's full name (object names)."""
    watch_namespaces: list[NamespaceName] = Field(
        default_factory=list, json_schema_extra={"uniqueItems": True}
    )
    """Namespaces to serve; empty means all. When set, RBAC is granted by a Role in each of
    them instead of a ClusterRole."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level."""
    log_format: Literal["json", "text"] = "json"
    """Log format."""
    max_concurrent_reconciles: int = Field(4, ge=1, le=64)
    """Objects reconciled at the same time."""
    extra_args: list[str] = Field(default_factory=list)
    """More command-line flags for the operator."""
    extra_env: list[dict[str, Any]] = Field(default_factory=list)
    """More environment variables (Kubernetes EnvVar objects)."""
    service_account: ServiceAccountValues = Field(default_factory=ServiceAccountValues)
    """The ServiceAccount."""
    rbac: RbacValues = Field(default_factory=RbacValues)
    """RBAC."""
    common_labels: dict[str, str] = Field(default_factory=dict)
    """Labels on every object the chart templates (not in its selectors; Helm installs the CRDs
    in crds/ untemplated)."""
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations on the operator pods."""
    pod_labels: dict[str, str] = Field(default_factory=dict)
    """Labels on the operator pods."""
    pod_security_context: dict[str, Any] = Field(
        default_factory=lambda: {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    )
    """Pod security context (the default passes Pod Security "restricted"; no runAsUser, so the
    image's user 65532 runs, or the uid OpenShift assigns from the namespace's range)."""
    security_context: dict[str, Any] = Field(
        default_factory=lambda: {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        }
    )
    """Container security context (the default passes Pod Security "restricted")."""
    resources: dict[str, Any] = Field(
        default_factory=lambda: {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"memory": "256Mi"},
        }
    )
    """Container resources."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Node selector."""
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    """Tolerations."""
    affinity: dict[str, Any] = Field(default_factory=dict)
    """Affinity; empty with replicaCount 2 or more: the operator pods prefer different nodes
    (podAntiAffinity on kubernetes.io/hostname)."""
    topology_spread_constraints: list[dict[str, Any]] = Field(default_factory=list)
    """Topology spread constraints."""
    priority_class_name: str = ""
    """Priority class of the operator pods."""
    termination_grace_period_seconds: int = Field(30, ge=0)
    """Seconds a stopping operator pod has to finish the reconciles in hand and step down."""
    probes: ProbesValues = Field(default_factory=ProbesValues)
    """The operator's probes."""
    pod_disruption_budget: PodDisruptionBudgetValues = Field(
        default_factory=PodDisruptionBudgetValues
    )
    """PodDisruptionBudget."""
    extra_volumes: list[dict[str, Any]] = Field(default_factory=list)
    """More volumes of the operator pods (Kubernetes Volume objects)."""
    extra_volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    """More volume mounts of the operator container (Kubernetes VolumeMount objects)."""
    metrics: MetricsValues = Field(default_factory=MetricsValues)
    """Metrics."""
    user_roles: UserRolesValues = Field(default_factory=UserRolesValues)
    """Roles for the users of the custom resources."""
    dashboard: DashboardValues = Field(default_factory=DashboardValues)
    """Grafana dashboard."""
    network_policy: NetworkPolicyValues = Field(default_factory=NetworkPolicyValues)
    """NetworkPolicy."""


class AdmissionPolicyValues(KubeModel):
    """A ValidatingAdmissionPolicy shipped with the chart (cluster-wide, one per cluster)."""

    enabled: bool = True
    """Install the policy and its binding."""
