"""Generate an operator's Helm chart from Python: its values, RBAC rules and operator specifics.

Each operator describes its chart with a :class:`ChartSpec`: the console script, the default
values (a :class:`~opsuite_packaging.chart_values.ChartValues` model), the RBAC rules its code
needs and any templates of its own (e.g. admission policies). :func:`chart_files` turns that
into ``Chart.yaml``, ``values.yaml``, ``values.schema.json``, the README and
``templates/_operator.tpl``; the templates every chart shares come from ``shared/helm/`` with
their ``opsuite.`` template names renamed to the chart's, so that the charts can be subcharts
of one umbrella chart without their named templates colliding.
"""

from __future__ import annotations

import copy
import json
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel

from opsuite_common.store import JSON
from opsuite_packaging.chart_values import CHART_REPOSITORY, ChartValues
from opsuite_packaging.descriptions import described_schema, field_description

TEMPLATE_PREFIX = "opsuite."
"""Prefix of named templates in shared/helm/templates, replaced by ``<chart name>.``."""
LEASE_PLACEHOLDER = "LEADER-ELECTION-LEASE"
"""Stands for the Lease's name (the release's full name) in :data:`LEADER_ELECTION_RULES`."""
_LABELS_PLACEHOLDER = "CHART-LABELS"
MIN_KUBE_VERSION = "1.34.0"
"""Oldest Kubernetes the charts and the bundles claim: the oldest minor e2e.yaml's kind matrix
tests (hack/tests/test_workflows.py checks that they agree)."""
KUBE_VERSION = f">={MIN_KUBE_VERSION}-0"


@dataclass(frozen=True)
class PolicyRule:
    """One RBAC rule."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()
    checked_on: tuple[str, str, str] | None = None
    """(group, resource, verb) of the request whose admission checks this grant, for a grant
    no request uses itself: ``update`` on ``<owner>/finalizers``, which the API server's
    OwnerReferencesPermissionEnforcement plugin asks for when an object names that owner with
    ``blockOwnerDeletion``."""

    def to_kube(self) -> JSON:
        """The rule as the RBAC API spells it."""
        rule: JSON = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule

    def grants(self) -> Iterator[tuple[str, str, str]]:
        """Every (API group, resource, verb) the rule allows."""
        for group in self.api_groups:
            for resource in self.resources:
                for verb in self.verbs:
                    yield group, resource, verb


@dataclass(frozen=True)
class OptionalRules:
    """Rules granted in every served namespace only while a chart value is true: a feature
    that is off by default leaves no right behind (ConfigMapSync's ``secrets.enabled``)."""

    value: str
    """The boolean value that grants them, as a path under ``.Values`` (``secrets.enabled``)."""
    rules: tuple[PolicyRule, ...]
    user_resources: tuple[str, ...] = ()
    """The chart's custom resources (plurals of its CRD's group) that the feature serves: the
    users' view and edit roles cover them only while the value is true (SecretSyncs)."""


LEADER_ELECTION_RULES = (
    PolicyRule(("coordination.k8s.io",), ("leases",), ("create",)),
    PolicyRule(
        ("coordination.k8s.io",),
        ("leases",),
        ("get", "update", "watch"),
        resource_names=(LEASE_PLACEHOLDER,),
    ),
)
"""Leader election, in the operator's own namespace: create the Lease, then read, renew and
watch only that one (a watch on one name is authorised against resourceNames)."""

METRICS_AUTH_RULES = (
    PolicyRule(("authentication.k8s.io",), ("tokenreviews",), ("create",)),
    PolicyRule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),
)
"""Secure metrics (``--metrics-secure``): review each scraper's token and its right to /metrics
(cluster-scoped, so always in the ClusterRole)."""
METRICS_READER_RULE: JSON = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
"""The metrics-reader ClusterRole's one rule: what a scraper needs with secure metrics."""
VIEW_VERBS = ("get", "list", "watch")
EDIT_VERBS = ("create", "update", "patch", "delete", "deletecollection")
"""The users' roles on the custom resources: view, and edit on top of it (cert-manager's)."""


@dataclass(frozen=True)
class ChartSpec:
    """What makes one operator's chart different from the others."""

    name: str
    """Chart name, also the image name and the default release's object names."""
    command: str
    """The operator's console script (the image's entrypoint)."""
    description: str
    """One paragraph for Chart.yaml and the README."""
    crd_name: str
    """``<plural>.<group>`` of the operator's CRD."""
    values: ChartValues
    """Default values (the model's class gives the schema)."""
    namespaced_rules: tuple[PolicyRule, ...]
    """Rules needed in every served namespace: one ClusterRole, or a Role per namespace."""
    optional_rules: tuple[OptionalRules, ...] = ()
    """More rules in every served namespace, each set only while its value is true (not in
    the OLM bundle, whose permissions cannot depend on a value)."""
    cluster_rules: tuple[PolicyRule, ...] = ()
    """Rules on cluster-scoped resources: always in the ClusterRole."""
    operator_args: str = ""
    """Go-template lines of extra container args taken from the values."""
    keywords: tuple[str, ...] = ()
    """Chart keywords."""
    security_notes: str = ""
    """More bullets (markdown) for the README's Security section, e.g. admission policies."""
    templates: Mapping[str, str] = field(default_factory=dict)
    """More templates of this chart (file name under templates/: content)."""


def metrics_auth_rules(spec: ChartSpec) -> tuple[PolicyRule, ...]:
    """What secure metrics add to ``spec``'s ClusterRole: those of :data:`METRICS_AUTH_RULES`
    its own cluster rules do not already hold."""
    return tuple(r for r in METRICS_AUTH_RULES if r not in spec.cluster_rules)


def _rules_yaml(rules: tuple[PolicyRule, ...]) -> str:
    if not rules:
        return ""
    return yaml.safe_dump([r.to_kube() for r in rules], sort_keys=False, width=100).rstrip()


def _namespaced_rules(spec: ChartSpec) -> str:
    """The namespaced rules, then each set of optional ones inside an ``if`` on its value."""
    body = _rules_yaml(spec.namespaced_rules)
    for optional in spec.optional_rules:
        rules = _rules_yaml(optional.rules)
        body += f"\n{{{{- if .Values.{optional.value} }}}}\n{rules}\n{{{{- end }}}}"
    return body


def _define(name: str, body: str) -> str:
    return f'{{{{- define "{name}" -}}}}\n{body}\n{{{{- end }}}}\n'


def operator_template(spec: ChartSpec) -> str:
    """``templates/_operator.tpl``: the chart's RBAC rules, CRD name and extra args."""
    prefix = f"{spec.name}."
    lease = LEADER_ELECTION_RULES
    election = _rules_yaml(lease).replace(
        LEASE_PLACEHOLDER, f'{{{{ include "{prefix}fullname" . }}}}'
    )
    return "".join(
        [
            "{{/* Generated by `make manifests` from the operator's ChartSpec; do not edit. */}}\n",
            _define(prefix + "namespacedRules", _namespaced_rules(spec)),
            _define(prefix + "clusterRules", _rules_yaml(spec.cluster_rules)),
            _define(prefix + "leaderElectionRules", election),
            _define(
                prefix + "metricsAuthRules",
                _rules_yaml(metrics_auth_rules(spec)),
            ),
            _define(prefix + "crdName", spec.crd_name),
            _define(prefix + "operatorArgs", spec.operator_args.rstrip()),
        ]
    )


def user_roles_template(spec: ChartSpec) -> str:
    """``templates/user-roles.yaml``: <fullname>-view, aggregated into the built-in view, edit
    and admin roles, and <fullname>-edit, into edit and admin unless
    ``userRoles.aggregateToEdit`` is false (cert-manager's pattern)."""
    plural, group = spec.crd_name.split(".", 1)
    prefix = f"{spec.name}."

    def role(suffix: str, verbs: tuple[str, ...], aggregate: tuple[str, ...], when: str) -> str:
        labels = "".join(
            f'    rbac.authorization.k8s.io/aggregate-to-{to}: "true"\n' for to in aggregate
        )
        rule = _rules_yaml((PolicyRule((group,), (plural,), verbs),))
        for optional in (o for o in spec.optional_rules if o.user_resources):
            served = _rules_yaml((PolicyRule((group,), optional.user_resources, verbs),))
            rule += f"\n{{{{- if .Values.{optional.value} }}}}\n{served}\n{{{{- end }}}}"
        return (
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n"
            f'  name: {{{{ include "{prefix}fullname" . }}}}-{suffix}\n  labels:\n'
            f'    {{{{- include "{prefix}labels" . | nindent 4 }}}}\n'
            + (f"    {{{{- if {when} }}}}\n{labels}    {{{{- end }}}}\n" if when else labels)
            + "rules:\n"
            + textwrap.indent(rule, "  ")
            + "\n"
        )

    return (
        "{{/* Generated by `make manifests` from the operator's ChartSpec; do not edit. */}}\n"
        "{{- if .Values.userRoles.create }}\n"
        + role("view", VIEW_VERBS, ("view", "edit", "admin"), "")
        + role("edit", EDIT_VERBS, ("edit", "admin"), ".Values.userRoles.aggregateToEdit")
        + "{{- end }}\n"
    )


def shared_template(chart: str, source: str) -> str:
    """A template of shared/helm/templates with its named templates renamed for ``chart``."""
    return re.sub(r'(define|include) "opsuite\.', rf'\1 "{chart}.', source)


def policy_template(
    chart: str,
    condition: str,
    header: str,
    documents: Sequence[JSON],
    substitutions: Mapping[str, str] | None = None,
) -> str:
    """A template rendering ``documents`` (e.g. an admission policy) when ``condition`` holds,
    under ``header`` (YAML comment lines).

    Each object gets the chart's labels; each key of ``substitutions`` in the YAML text is
    replaced by its value (a template expression standing for a value or the namespace).
    """
    labels = f'  labels:\n    {{{{- include "{chart}.labels" . | nindent 4 }}}}\n'
    rendered = []
    for document in documents:
        labelled = copy.deepcopy(document)
        labelled["metadata"]["labels"] = _LABELS_PLACEHOLDER
        text = yaml.safe_dump(labelled, sort_keys=False, width=100)
        text = text.replace(f"  labels: {_LABELS_PLACEHOLDER}\n", labels)
        for old, new in (substitutions or {}).items():
            text = text.replace(old, new)
        rendered.append(text)
    return (
        f"{{{{- if {condition} }}}}\n{header.rstrip()}\n" + "---\n".join(rendered) + "{{- end }}\n"
    )


def _inline(node: Any, defs: JSON) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def values_schema(model: type[ChartValues]) -> JSON:
    """``values.schema.json``: the values model with unknown keys rejected at every level."""
    raw = described_schema(model)
    schema: JSON = _inline(raw, raw.get("$defs", {}))
    # Helm passes `global` to every chart that is a subchart; allow it.
    schema["properties"]["global"] = {"type": "object"}
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema}


def _description(model: type[BaseModel], name: str) -> str:
    return " ".join((field_description(model, name) or "").split())


def _scalar(value: Any) -> str:
    if isinstance(value, (str, dict, list)):
        return json.dumps(value)
    return yaml.safe_dump(value).split("\n")[0]


def _values_lines(model: BaseModel, dumped: JSON, indent: int) -> Iterator[str]:
    pad = " " * indent
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        for line in textwrap.wrap(_description(type(model), name), 100 - indent - 2):
            yield f"{pad}# {line}"
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield f"{pad}{key}:"
            yield from _values_lines(value, dumped[key], indent + 2)
        elif isinstance(dumped[key], (dict, list)) and dumped[key]:
            yield f"{pad}{key}:"
            block = yaml.safe_dump(dumped[key], sort_keys=False, default_flow_style=False)
            yield textwrap.indent(block.rstrip(), pad + "  ")
        else:
            yield f"{pad}{key}: {_scalar(dumped[key])}"


def values_yaml(values: ChartValues) -> str:
    """``values.yaml``: the default values, each with its description as a comment."""
    dumped = values.model_dump(by_alias=True, mode="json")
    header = "# Generated by `make manifests` from the chart's values model; do not edit.\n"
    return header + "\n".join(_values_lines(values, dumped, 0)) + "\n"


def _table_rows(model: BaseModel, dumped: JSON, path: str) -> Iterator[str]:
    for name, info in type(model).model_fields.items():
        key = f"{path}{info.alias or name}"
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _table_rows(value, dumped[info.alias or name], key + ".")
            continue
        default = json.dumps(dumped[info.alias or name], separators=(", ", ": "))
        yield f"| `{key}` | `{default}` | {_description(type(model), name)} |"


def values_table(values: ChartValues) -> str:
    """A markdown table of every value: key, default and description."""
    dumped = values.model_dump(by_alias=True, mode="json")
    rows = "\n".join(_table_rows(values, dumped, ""))
    return "| Key | Default | Description |\n|---|---|---|\n" + rows + "\n"


def rbac_table(spec: ChartSpec) -> str:
    """A markdown table of the chart's RBAC rules and where each is granted."""
    rows = []
    scopes = (
        ("served namespaces", spec.namespaced_rules),
        *((f"served namespaces, with `{o.value}`", o.rules) for o in spec.optional_rules),
        ("cluster", spec.cluster_rules),
        ("release namespace (leader election)", LEADER_ELECTION_RULES),
        ("cluster, with `metrics.secure`", METRICS_AUTH_RULES),
    )
    for scope, rules in scopes:
        for rule in rules:
            groups = ", ".join(g or "core" for g in rule.api_groups)
            names = ", ".join(rule.resource_names).replace(LEASE_PLACEHOLDER, "the release's")
            resources = ", ".join(rule.resources) + (f" ({names} only)" if names else "")
            rows.append(f"| {scope} | {groups} | {resources} | {', '.join(rule.verbs)} |")
    return "| Where | API group | Resources | Verbs |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (descriptions, YAML-valued annotations) as literal blocks."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def dump_yaml(obj: JSON) -> str:
    """YAML with multi-line strings as literal blocks."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=100)


MAINTAINERS = ({"name": "opsuite maintainers", "email": "maintainers@opsuite.dev"},)
"""The charts' maintainers (Chart.yaml), also their owners on Artifact Hub."""


def chart_yaml(spec: ChartSpec, version: str, annotations: Mapping[str, str]) -> str:
    """``Chart.yaml``; chart version and appVersion are both the project's version;
    ``annotations`` are Artifact Hub's (:mod:`opsuite_packaging.artifacthub`)."""
    chart = {
        "apiVersion": "v2",
        "name": spec.name,
        "description": spec.description,
        "type": "application",
        "version": version,
        "appVersion": version,
        "kubeVersion": KUBE_VERSION,
        "keywords": ["kubernetes", "operator", "opsuite", *spec.keywords],
        "home": "https://github.com/opsuite/opsuite",
        "icon": "https://raw.githubusercontent.com/opsuite/opsuite/main/docs/assets/opsuite-icon.svg",
        "sources": ["https://github.com/opsuite/opsuite"],
        "maintainers": [dict(m) for m in MAINTAINERS],
        "annotations": dict(annotations),
    }
    header = "# Generated by `make manifests`; do not edit.\n"
    return header + dump_yaml(chart)


def _edit_aggregation(spec: ChartSpec) -> str:
    if spec.values.user_roles.aggregate_to_edit:
        return "aggregated into `edit` and `admin`."
    return (
        "aggregated into none by default\n  (`userRoles.aggregateToEdit`): bind it to whom you "
        "choose, or turn that on."
    )


def chart_readme(spec: ChartSpec) -> str:
    """The chart's README: install, security, RBAC and the values table."""
    return f"""<!-- Generated by `make manifests` from the operator's ChartSpec; do not edit. -->
# {spec.name}

{spec.description}

## Install

```sh
helm install {spec.name} {CHART_REPOSITORY}/{spec.name} \\
  --namespace opsuite-system --create-namespace
# or from a clone of the repository:
helm install {spec.name} charts/{spec.name} --namespace opsuite-system --create-namespace
```

The CRD (`{spec.crd_name}`) is in `crds/`: Helm installs it with the chart, never upgrades or
deletes it. `helm uninstall` removes everything else, cluster-scoped objects included, and leaves
the CRD and your custom resources; `kubectl delete crd {spec.crd_name}` removes them too.

## Upgrade

The CRD first, from the chart version you upgrade to, then the release:

```sh
helm show crds {CHART_REPOSITORY}/{spec.name} --version <version> \
  | kubectl apply --server-side --force-conflicts --field-manager=opsuite-crds -f -
helm upgrade {spec.name} {CHART_REPOSITORY}/{spec.name} --version <version> \
  --namespace opsuite-system --reuse-values
```

`--force-conflicts` is needed: Helm created the CRD, so its field manager owns the CRD's
`versions`, and a plain server-side apply is refused with a conflict. It takes the CRD over for
`opsuite-crds`, and the next upgrade is the same command. From a clone, `helm show crds
charts/{spec.name}`. The e2e suite runs exactly this from the previous release while the
operator works (`e2e/test_helm_upgrade.py`): the Deployment rolls, the new pod takes the Lease
over, and no change made meanwhile is lost or applied twice.

## Security

- The pod passes Pod Security "restricted": non-root numeric user, seccomp `RuntimeDefault`,
  every capability dropped, no privilege escalation, read-only root filesystem (`/tmp` is an
  `emptyDir`).
- No uid is set: the image's user (65532) runs, or on OpenShift the uid restricted-v2 assigns
  from the namespace's range, with group 0 (`podSecurityContext.runAsUser` sets one).
- Leader election is always on (`--leader-elect`); with `replicaCount` ≥ 2 one pod leads and the
  others stand by, and a PodDisruptionBudget keeps one running.
- RBAC is what the operator's code calls, nothing more: a ClusterRole when it serves every
  namespace, a Role in each of `watchNamespaces` otherwise.
- kube-score (its default checks, and the optional seccomp and ports ones) finds nothing in the
  rendered chart, with its defaults or every optional object on, but what the repository's
  `charts/kube-score-waivers.yaml` waives, each with the reason: no CPU limit, no
  ephemeral-storage request, `imagePullPolicy: IfNotPresent`, no fixed uid or gid, a
  NetworkPolicy that is opt-in and restricts ingress only, one replica by default.
- `/metrics` is served over HTTPS (`metrics.secure`, on by default), each request
  authenticated with a TokenReview and authorized with a SubjectAccessReview, as
  controller-runtime's `WithAuthenticationAndAuthorization` does. The ServiceMonitor
  (`metrics.serviceMonitor.enabled`) scrapes as the chart's `<fullname>-metrics-scraper`
  ServiceAccount; grant other scrapers the `<fullname>-metrics-reader` ClusterRole (get on
  `/metrics`).
  The certificate is `metrics.certSecret` or, without one, self-signed. The probes
  (`/healthz`, `/readyz`, port 8081) stay plain HTTP and open, as in controller-runtime.
- Users get ClusterRoles for `{spec.crd_name}` (`userRoles`):
  `<fullname>-view`, aggregated into the built-in `view`, `edit` and `admin` roles, and
  `<fullname>-edit`, {_edit_aggregation(spec)}
{spec.security_notes}
{rbac_table(spec)}
## Testing a release

`helm test {spec.name} -n opsuite-system` checks a release: every operator pod answers
`/readyz` and the CRD is Established (a test Pod in the operator's image, with a ServiceAccount
that may only list the namespace's pods and get the CRD). A passed test leaves nothing behind,
so `helm uninstall` leaves only the CRD; a failed test keeps its Pod, and
`kubectl logs -n opsuite-system {spec.name}-test` says which check failed (for a release named
`{spec.name}`).

## Values

`global.imageRegistry` (for a mirror, as Bitnami's charts take it) replaces the registry of
`image.repository` (its first part, when that names a host) or goes in front of it.

{values_table(spec.values)}"""


HELMIGNORE = """\
# Generated by `make manifests`; do not edit. Left out of `helm package`.
.DS_Store
.git/
.gitignore
*.swp
*.bak
*.tmp
*.orig
*~
.idea/
.vscode/
__pycache__/
*.pyc
"""
"""The chart's ``.helmignore``: editor, VCS and bytecode leftovers never reach the package."""


def chart_files(
    spec: ChartSpec,
    *,
    version: str,
    shared_templates: Mapping[str, str],
    dashboard: str,
    annotations: Mapping[str, str],
    helm_test: str,
) -> dict[str, str]:
    """Every generated file of the chart but its CRDs (path under the chart: content);
    ``helm_test`` is the script the chart's test Pod runs (``files/helm_test.py``)."""
    files = {
        ".helmignore": HELMIGNORE,
        "files/helm_test.py": helm_test,
        "Chart.yaml": chart_yaml(spec, version, annotations),
        "values.yaml": values_yaml(spec.values),
        "values.schema.json": json.dumps(values_schema(type(spec.values)), indent=2) + "\n",
        "README.md": chart_readme(spec),
        "dashboards/opsuite-operators.json": dashboard,
        "templates/_operator.tpl": operator_template(spec),
        "templates/user-roles.yaml": user_roles_template(spec),
    }
    for name, source in shared_templates.items():
        files[f"templates/{name}"] = shared_template(spec.name, source)
    for name, content in spec.templates.items():
        files[f"templates/{name}"] = content
    return files
