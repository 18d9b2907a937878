"""The bad-input corpus: objects each CRD must refuse, and the API server's message for each.

Every case is a valid base object of its kind (``BASES``, itself checked to be accepted) with
one change deep-merged into it (``REMOVE`` deletes a key, ``{}`` replaces). The message is a
distinctive part of what the API server answers: OpenAPI schema errors (types, enums,
patterns, bounds, required fields, list-map keys), the CRDs' CEL rules
(``x-kubernetes-validations``, from the ``cel(...)`` rules of each operator's models.py) and,
under ``fieldValidation=Strict``, unknown fields.
e2e/test_invalid_inputs.py sends each one to the API server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from configmapsync_operator import models as cms
from poddebugger_operator import models as pdbg
from podset_operator import models as pset

REMOVE: Final = object()
"""In a change: delete this key from the base object."""


@dataclass(frozen=True)
class Case:
    """One invalid object: its kind, test id, why it is invalid, the change, the message."""

    kind: str
    id: str
    why: str
    change: dict[str, Any]
    message: str


def merged(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``change`` deep-merged into it: non-empty dicts merge, other values
    (``{}`` included) replace."""
    out = copy.deepcopy(base)
    for key, value in change.items():
        if value is REMOVE:
            out.pop(key, None)
        elif value and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


API = {
    "PodSet": (pset.GROUP, pset.VERSION, pset.PLURAL),
    "ConfigMapSync": (cms.GROUP, cms.VERSION, cms.PLURAL),
    "SecretSync": (cms.GROUP, cms.VERSION, cms.SECRET_PLURAL),
    "PodDebugger": (pdbg.GROUP, pdbg.VERSION, pdbg.PLURAL),
}
"""(group, version, plural) of each kind."""

BASES: dict[str, dict[str, Any]] = {
    "PodSet": {
        "apiVersion": f"{pset.GROUP}/{pset.VERSION}",
        "kind": "PodSet",
        "metadata": {"name": "invalid"},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": "invalid"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    },
    "ConfigMapSync": {
        "apiVersion": f"{cms.GROUP}/{cms.VERSION}",
        "kind": "ConfigMapSync",
        "metadata": {"name": "invalid"},
        "spec": {"configMapName": "settings", "destinationNamespaces": ["team-a"]},
    },
    "SecretSync": {
        "apiVersion": f"{cms.GROUP}/{cms.VERSION}",
        "kind": "SecretSync",
        "metadata": {"name": "invalid"},
        "spec": {"secretName": "settings", "destinationNamespaces": ["team-a"]},
    },
    "PodDebugger": {
        "apiVersion": f"{pdbg.GROUP}/{pdbg.VERSION}",
        "kind": "PodDebugger",
        "metadata": {"name": "invalid"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "image": "busybox"},
    },
}
"""A valid object of each kind; every case changes one thing in it."""

LONG_LABEL_VALUE = "v" * 64
SELECTOR_ENTRIES = {f"k{i}": "v" for i in range(33)}
"""One entry more than a label selector's matchLabels may hold."""
TEMPLATE_LABELS = {f"k{i}": "v" for i in range(64)}
"""With the base's own label, one more than a PodSet template may carry."""


def _ps(**spec: Any) -> dict[str, Any]:
    return {"spec": spec}


def _tpl(**template: Any) -> dict[str, Any]:
    return {"spec": {"template": template}}


def _rolling(**rolling: Any) -> dict[str, Any]:
    return {"spec": {"updateStrategy": {"rollingUpdate": rolling}}}


def _invalid_selector(field: str) -> list[tuple[str, str, dict[str, Any], str]]:
    """Schema cases shared by every label selector (``field`` is its spec key)."""
    return [
        (
            "selector operator unknown",
            "operators are In, NotIn, Exists and DoesNotExist",
            {field: {"matchExpressions": [{"key": "app", "operator": "Matches"}]}},
            'Unsupported value: "Matches"',
        ),
        (
            "selector expression without key",
            "a requirement names the label it tests",
            {field: {"matchExpressions": [{"operator": "Exists"}]}},
            f"spec.{field}.matchExpressions[0].key: Required value",
        ),
        (
            "selector key not a label key",
            "keys are qualified names: no spaces",
            {field: {"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}},
            f"spec.{field}.matchExpressions[0].key in body should match",
        ),
        (
            "selector value not a label value",
            "label values start and end alphanumeric",
            {field: {"matchLabels": {"app": "-web"}}},
            f"spec.{field}.matchLabels.app in body should match",
        ),
        (
            "selector value too long",
            "label values have at most 63 characters",
            {field: {"matchLabels": {"app": LONG_LABEL_VALUE}}},
            "Too long: may not be more than 63 bytes",
        ),
        (
            "selector with 33 labels",
            "at most 32 matchLabels entries",
            {field: {"matchLabels": SELECTOR_ENTRIES}},
            f"spec.{field}.matchLabels: Too many: ",
        ),
        (
            "selector not an object",
            "a selector is an object, not a string",
            {field: "app=web"},
            f'spec.{field}: Invalid value: "string": spec.{field} in body must be of type object',
        ),
    ]


def _unknown(kind: str) -> list[tuple[str, str, dict[str, Any], str]]:
    """Structural cases shared by every kind."""
    return [
        (
            "unknown top-level field",
            "a typo of spec is refused, not pruned",
            {"specs": {}},
            'unknown field "specs"',
        ),
        (
            "no spec",
            "spec is required",
            {"spec": REMOVE},
            "spec: Required value",
        ),
        (
            "spec not an object",
            "spec is an object",
            {"spec": "replicas=1"},
            'spec: Invalid value: "string": spec in body must be of type object',
        ),
        (
            "name not a DNS subdomain",
            "object names are lowercase RFC 1123 subdomains",
            {"metadata": {"name": f"Invalid_{kind}"}},
            "a lowercase RFC 1123 subdomain must consist of",
        ),
    ]


PODSET: list[tuple[str, str, dict[str, Any], str]] = [
    # replicas and minReadySeconds
    (
        "negative replicas",
        "a PodSet cannot run fewer than zero pods",
        _ps(replicas=-1),
        "spec.replicas in body should be greater than or equal to 0",
    ),
    (
        "replicas above the maximum",
        "100,000 pods is the documented bound",
        _ps(replicas=100_001),
        "spec.replicas in body should be less than or equal to 100000",
    ),
    (
        "replicas as a string",
        "the schema is typed: no implicit conversion from strings",
        _ps(replicas="3"),
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer',
    ),
    (
        "replicas as a fraction",
        "half a pod does not exist",
        _ps(replicas=1.5),
        "spec.replicas in body must be of type integer",
    ),
    (
        "negative minReadySeconds",
        "a duration is not negative",
        _ps(minReadySeconds=-1),
        "spec.minReadySeconds in body should be greater than or equal to 0",
    ),
    (
        "minReadySeconds above a day",
        "86,400 s is the bound",
        _ps(minReadySeconds=86_401),
        "spec.minReadySeconds in body should be less than or equal to 86400",
    ),
    # progressDeadlineSeconds
    (
        "progressDeadlineSeconds zero",
        "a rollout gets at least a second before it counts as stalled",
        _ps(progressDeadlineSeconds=0),
        "spec.progressDeadlineSeconds in body should be greater than or equal to 1",
    ),
    (
        "progressDeadlineSeconds as a string",
        "the schema is typed: no duration strings",
        _ps(progressDeadlineSeconds="10m"),
        "spec.progressDeadlineSeconds in body must be of type integer",
    ),
    (
        "progressDeadlineSeconds equal to minReadySeconds",
        "no pod could become available before the deadline (CEL, as a Deployment)",
        _ps(minReadySeconds=30, progressDeadlineSeconds=30),
        "progressDeadlineSeconds must be greater than minReadySeconds",
    ),
    (
        "minReadySeconds above the default progressDeadlineSeconds",
        "the default deadline (600) counts too (CEL after defaulting)",
        _ps(minReadySeconds=601),
        "progressDeadlineSeconds must be greater than minReadySeconds",
    ),
    # paused
    (
        "paused as a string",
        'the schema is typed: "false" is not false, and would read as true',
        _ps(paused="false"),
        "spec.paused in body must be of type boolean",
    ),
    # revisionHistoryLimit
    (
        "negative revisionHistoryLimit",
        "a count of old templates is not negative",
        _ps(revisionHistoryLimit=-1),
        "spec.revisionHistoryLimit in body should be greater than or equal to 0",
    ),
    (
        "revisionHistoryLimit as a string",
        "the schema is typed: no implicit conversion from strings",
        _ps(revisionHistoryLimit="10"),
        "spec.revisionHistoryLimit in body must be of type integer",
    ),
    # selector (CEL)
    (
        "selector not matching template",
        "the PodSet would never see the pods it creates (CEL)",
        _ps(selector={"matchLabels": {"app": "other"}}),
        "selector does not match template labels",
    ),
    (
        "selector expression not matching template",
        "In with values the template's label does not have (CEL)",
        _ps(selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}),
        "selector does not match template labels",
    ),
    (
        "selector DoesNotExist on a template label",
        "the template carries the label the selector excludes (CEL)",
        _ps(selector={"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
        "selector does not match template labels",
    ),
    (
        "empty selector",
        "{} would match every pod of the namespace (CEL)",
        _ps(selector={}),
        "empty selector would match every pod",
    ),
    (
        "selector with empty matchLabels",
        "an empty map selects as much as {} (CEL)",
        _ps(selector={"matchLabels": {}}),
        "empty selector would match every pod",
    ),
    *(
        (name, why, {"spec": change}, message)
        for name, why, change, message in _invalid_selector("selector")
    ),
    # template
    (
        "no template",
        "pods are created from the template",
        _ps(template=REMOVE),
        "spec.template: Required value",
    ),
    (
        "template without pod spec",
        "a template without spec has no containers",
        _tpl(spec=REMOVE),
        "spec.template.spec: Required value",
    ),
    (
        "empty containers",
        "a pod needs at least one container",
        _tpl(spec={"containers": []}),
        "should have at least 1 items",
    ),
    (
        "containers not a list",
        "containers is a list of objects",
        _tpl(spec={"containers": "busybox"}),
        "spec.template.spec.containers in body must be of type array",
    ),
    (
        "container not an object",
        "each container is an object",
        _tpl(spec={"containers": ["busybox"]}),
        "spec.template.spec.containers[0] in body must be of type object",
    ),
    (
        "template label value invalid",
        "pod label values are label values",
        _tpl(metadata={"labels": {"app": "invalid", "tier": "front end"}}),
        "spec.template.metadata.labels.tier in body should match",
    ),
    (
        "template label value too long",
        "at most 63 characters",
        _tpl(metadata={"labels": {"app": "invalid", "tier": LONG_LABEL_VALUE}}),
        "Too long: may not be more than 63 bytes",
    ),
    (
        "template with 65 labels",
        "at most 64 labels on a template",
        _tpl(metadata={"labels": TEMPLATE_LABELS}),
        "spec.template.metadata.labels: Too many: 65: must have at most 64 items",
    ),
    (
        "template annotation not a string",
        "annotation values are strings",
        _tpl(metadata={"annotations": {"replicas": 3}}),
        "spec.template.metadata.annotations.replicas in body must be of type string",
    ),
    (
        "restartPolicy Never",
        "a PodSet replaces pods that exit: at once, with no backoff (CEL, as apps/v1)",
        _tpl(spec={"restartPolicy": "Never"}),
        "restartPolicy must be Always: a PodSet replaces pods that exit",
    ),
    (
        "restartPolicy OnFailure",
        "Succeeded pods would pile up (CEL, as apps/v1)",
        _tpl(spec={"restartPolicy": "OnFailure"}),
        "spec.template.spec.restartPolicy: Invalid value",
    ),
    (
        "template metadata name",
        "pod names are generated; a template name would be pruned (Strict)",
        _tpl(metadata={"name": "fixed"}),
        'unknown field "spec.template.metadata.name"',
    ),
    # update strategy
    (
        "unknown strategy",
        "Recreate is a Deployment strategy, not a PodSet one",
        {"spec": {"updateStrategy": {"type": "Recreate"}}},
        'spec.updateStrategy.type: Unsupported value: "Recreate"',
    ),
    (
        "rollingUpdate with OnDelete",
        "bounds of a strategy that is not used (CEL)",
        {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"maxSurge": 1}}}},
        "rollingUpdate is only allowed with type RollingUpdate",
    ),
    (
        "bad percentage",
        "maxSurge is an integer or N% (CEL)",
        _rolling(maxSurge="ten%"),
        "must be a non-negative integer or a percentage such as 25%",
    ),
    (
        "percentage without percent sign",
        "a string maxUnavailable must end in % (CEL)",
        _rolling(maxUnavailable="25"),
        "must be a non-negative integer or a percentage such as 25%",
    ),
    (
        "negative maxUnavailable",
        "a bound is not negative (CEL)",
        _rolling(maxUnavailable=-1),
        "must be a non-negative integer or a percentage such as 25%",
    ),
    (
        "maxSurge as a boolean",
        "int-or-string accepts neither true nor false",
        _rolling(maxSurge=True),
        "spec.updateStrategy.rollingUpdate.maxSurge",
    ),
    (
        "unknown rollingUpdate field",
        "a misspelt bound is refused, not pruned (Strict)",
        _rolling(maxSurges=1),
        'unknown field "spec.updateStrategy.rollingUpdate.maxSurges"',
    ),
    (
        "unknown spec field",
        "replica for replicas is refused, not pruned (Strict)",
        _ps(replica=3),
        'unknown field "spec.replica"',
    ),
    *_unknown("PodSet"),
]

CONFIGMAPSYNC: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "copyLabels entry with a space",
        "label keys and * patterns only",
        _ps(copyLabels=["team name"]),
        "spec.copyLabels[0] in body should match",
    ),
    (
        "copyAnnotations entry as a regular expression",
        "* is the only wildcard: no regular expressions",
        _ps(copyAnnotations=["example.com/(a|b)"]),
        "spec.copyAnnotations[0] in body should match",
    ),
    (
        "copyLabels duplicates",
        "a set of keys",
        _ps(copyLabels=["team", "team"]),
        "Duplicate value",
    ),
    (
        "no configMapName",
        "the source must be named",
        _ps(configMapName=REMOVE),
        "spec.configMapName: Required value",
    ),
    (
        "empty configMapName",
        "an empty name names nothing",
        _ps(configMapName=""),
        "spec.configMapName in body should be at least 1 chars long",
    ),
    (
        "configMapName with capitals",
        "ConfigMap names are DNS subdomains",
        _ps(configMapName="Settings"),
        "spec.configMapName in body should match",
    ),
    (
        "configMapName too long",
        "at most 253 characters",
        _ps(configMapName="s" * 254),
        "spec.configMapName: Too long: may not be more than 253 bytes",
    ),
    (
        "configMapName not a string",
        "a name is a string",
        _ps(configMapName=7),
        "spec.configMapName in body must be of type string",
    ),
    (
        "no destinations",
        "nothing to copy to (CEL)",
        _ps(destinationNamespaces=REMOVE),
        "set destinationNamespaces, namespaceSelector or both",
    ),
    (
        "empty destinations",
        "an empty list is no destination either (CEL)",
        _ps(destinationNamespaces=[]),
        "set destinationNamespaces, namespaceSelector or both",
    ),
    (
        "source namespace as destination",
        "a ConfigMap cannot be synced onto itself (CEL)",
        _ps(sourceNamespace="team-a"),
        "the source namespace cannot be a destination",
    ),
    (
        "destination namespace with capitals",
        "namespace names are DNS labels",
        _ps(destinationNamespaces=["Team-A"]),
        "spec.destinationNamespaces[0] in body should match",
    ),
    (
        "destination namespace with a dot",
        "a namespace is a DNS label, not a subdomain",
        _ps(destinationNamespaces=["team.a"]),
        "spec.destinationNamespaces[0] in body should match",
    ),
    (
        "destination namespace too long",
        "at most 63 characters",
        _ps(destinationNamespaces=["n" * 64]),
        "spec.destinationNamespaces[0]: Too long: may not be more than 63 bytes",
    ),
    (
        "empty destination namespace",
        "an empty name names nothing",
        _ps(destinationNamespaces=[""]),
        "spec.destinationNamespaces[0] in body should be at least 1 chars long",
    ),
    (
        "duplicate destination",
        "destinationNamespaces is a set",
        _ps(destinationNamespaces=["team-a", "team-a"]),
        'spec.destinationNamespaces[1]: Duplicate value: "team-a"',
    ),
    (
        "257 destinations",
        "at most 256 listed namespaces",
        _ps(destinationNamespaces=[f"team-{i}" for i in range(257)]),
        "spec.destinationNamespaces: Too many: 257: must have at most 256 items",
    ),
    (
        "destinations as a string",
        "a list, not a comma-separated string",
        _ps(destinationNamespaces="team-a,team-b"),
        "spec.destinationNamespaces in body must be of type array",
    ),
    (
        "sourceNamespace with capitals",
        "namespace names are DNS labels",
        _ps(sourceNamespace="Platform"),
        "spec.sourceNamespace in body should match",
    ),
    (
        "sourceNamespace too long",
        "at most 63 characters",
        _ps(sourceNamespace="p" * 64),
        "spec.sourceNamespace: Too long: may not be more than 63 bytes",
    ),
    (
        "unknown conflictPolicy",
        "Skip or Overwrite",
        _ps(conflictPolicy="Replace"),
        'spec.conflictPolicy: Unsupported value: "Replace"',
    ),
    (
        "lowercase conflictPolicy",
        "enums are case-sensitive",
        _ps(conflictPolicy="skip"),
        'spec.conflictPolicy: Unsupported value: "skip"',
    ),
    (
        "unknown deletionPolicy",
        "Delete or Orphan (Retain is a PersistentVolume word)",
        _ps(deletionPolicy="Retain"),
        'spec.deletionPolicy: Unsupported value: "Retain"',
    ),
    (
        "deletionPolicy as a boolean",
        "a policy is a string",
        _ps(deletionPolicy=False),
        "spec.deletionPolicy in body must be of type string",
    ),
    *(
        (f"namespace{name[0].upper()}{name[1:]}", why, {"spec": change}, message)
        for name, why, change, message in _invalid_selector("namespaceSelector")
    ),
    (
        "selector requirement with 33 values",
        "at most 32 values per requirement",
        _ps(
            namespaceSelector={
                "matchExpressions": [
                    {"key": "team", "operator": "In", "values": [f"t{i}" for i in range(33)]}
                ]
            }
        ),
        "spec.namespaceSelector.matchExpressions[0].values: Too many: 33",
    ),
    (
        "excludeNamespaces entry as a regular expression",
        "names and * patterns only: no regular expressions",
        _ps(excludeNamespaces=["team-(a|b)"]),
        "spec.excludeNamespaces[0] in body should match",
    ),
    (
        "excludeNamespaces entry with capitals",
        "namespace names are DNS labels",
        _ps(excludeNamespaces=["Kube-*"]),
        "spec.excludeNamespaces[0] in body should match",
    ),
    (
        "excludeNamespaces entry too long",
        "at most 63 characters, as a namespace name",
        _ps(excludeNamespaces=["n" * 64]),
        "spec.excludeNamespaces[0]: Too long: may not be more than 63 bytes",
    ),
    (
        "65 excludeNamespaces",
        "at most 64 exclusions",
        _ps(excludeNamespaces=[f"team-{i}" for i in range(65)]),
        "spec.excludeNamespaces: Too many: 65: must have at most 64 items",
    ),
    (
        "excludeNamespaces duplicates",
        "a set of patterns",
        _ps(excludeNamespaces=["kube-*", "kube-*"]),
        "Duplicate value",
    ),
    (
        "a namespace both listed and excluded",
        "a contradiction, refused rather than resolved silently (CEL)",
        _ps(excludeNamespaces=["team-a"]),
        "a namespace cannot be both listed in destinationNamespaces and excluded by name",
    ),
    (
        "includeKeys and excludeKeys together",
        "one or the other (CEL)",
        _ps(includeKeys=["a"], excludeKeys=["b"]),
        "set includeKeys or excludeKeys, not both",
    ),
    (
        "empty includeKeys",
        "an empty include list would copy nothing",
        _ps(includeKeys=[]),
        "spec.includeKeys in body should have at least 1 items",
    ),
    (
        "includeKeys entry with a slash",
        "ConfigMap keys are [-._a-zA-Z0-9]+, with * as the only wildcard",
        _ps(includeKeys=["conf/app.yaml"]),
        "spec.includeKeys[0] in body should match",
    ),
    (
        "excludeKeys entry too long",
        "at most 253 characters, as a key",
        _ps(excludeKeys=["k" * 254]),
        "spec.excludeKeys[0]: Too long: may not be more than 253 bytes",
    ),
    (
        "65 includeKeys",
        "at most 64 keys or patterns",
        _ps(includeKeys=[f"key-{i}" for i in range(65)]),
        "spec.includeKeys: Too many: 65: must have at most 64 items",
    ),
    (
        "excludeKeys as a string",
        "a list, not a comma-separated string",
        _ps(excludeKeys="a,b"),
        "spec.excludeKeys in body must be of type array",
    ),
    (
        "unknown spec field",
        "destinations for destinationNamespaces is refused, not pruned (Strict)",
        _ps(destinations=["team-b"]),
        'unknown field "spec.destinations"',
    ),
    (
        "unknown selector field",
        "matchLabel for matchLabels would select everything once pruned (Strict)",
        _ps(namespaceSelector={"matchLabel": {"team": "a"}}),
        'unknown field "spec.namespaceSelector.matchLabel"',
    ),
    *_unknown("ConfigMapSync"),
]


def _secret_names(change: Any) -> Any:
    """``change`` with configMapName spelled secretName (the one field the kinds name
    differently)."""
    if isinstance(change, dict):
        return {
            ("secretName" if k == "configMapName" else k): _secret_names(v)
            for k, v in change.items()
        }
    return change


SECRETSYNC: list[tuple[str, str, dict[str, Any], str]] = [
    *(
        (
            name.replace("configMapName", "secretName"),
            why,
            _secret_names(change),
            message.replace("configMapName", "secretName").replace("ConfigMapSync", "SecretSync"),
        )
        for name, why, change, message in CONFIGMAPSYNC
    ),
    (
        "configMapName on a SecretSync",
        "a SecretSync names a Secret; the ConfigMapSync's field is refused, not pruned",
        _ps(configMapName="settings"),
        'unknown field "spec.configMapName"',
    ),
    (
        "secretName with a namespace",
        "the source's namespace is sourceNamespace, never part of the name",
        _ps(secretName="platform/registry"),
        "spec.secretName in body should match",
    ),
]
"""A SecretSync's spec is a ConfigMapSync's with secretName for configMapName (one base model,
SyncSpec): every ConfigMapSync case, renamed, and what only a SecretSync can get wrong."""

_KEY = {"name": "s", "key": "k"}

PODDEBUGGER: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "no selector",
        "a PodDebugger must say which pods",
        _ps(selector=REMOVE),
        "spec.selector: Required value",
    ),
    (
        "empty selector",
        "{} would debug every pod of the namespace (CEL)",
        {"spec": {"selector": {}}},
        "selector must not be empty",
    ),
    (
        "selector with empty lists",
        "empty matchLabels and matchExpressions select as much as {} (CEL)",
        {"spec": {"selector": {"matchLabels": {}, "matchExpressions": []}}},
        "selector must not be empty",
    ),
    *(
        (name, why, {"spec": change}, message)
        for name, why, change, message in _invalid_selector("selector")
    ),
    (
        "no image",
        "the debug container needs an image",
        _ps(image=REMOVE),
        "spec.image: Required value",
    ),
    (
        "empty image",
        "an empty image names nothing",
        _ps(image=""),
        "spec.image in body should be at least 1 chars long",
    ),
    (
        "image too long",
        "at most 512 characters",
        _ps(image="i" * 513),
        "spec.image: Too long: may not be more than 512 bytes",
    ),
    (
        "image not a string",
        "an image reference is a string",
        _ps(image=["busybox"]),
        "spec.image in body must be of type string",
    ),
    (
        "command as a string",
        "command is a list, as in a container",
        _ps(command="sleep 3600"),
        "spec.command in body must be of type array",
    ),
    (
        "command with 65 items",
        "at most 64 arguments",
        _ps(command=["x"] * 65),
        "spec.command: Too many: 65: must have at most 64 items",
    ),
    (
        "argument too long",
        "at most 4096 characters each",
        _ps(args=["a" * 4097]),
        "spec.args[0]: Too long: may not be more than 4096 bytes",
    ),
    (
        "argument not a string",
        "arguments are strings",
        _ps(args=[3600]),
        "spec.args[0] in body must be of type string",
    ),
    (
        "env name starting with a digit",
        "env names start with a letter, '-', '.' or '_'",
        _ps(env=[{"name": "1LEVEL", "value": "debug"}]),
        "spec.env[0].name in body should match",
    ),
    (
        "env name empty",
        "an empty name names nothing",
        _ps(env=[{"name": "", "value": "debug"}]),
        "spec.env[0].name in body should be at least 1 chars long",
    ),
    (
        "env without name",
        "env is a list map keyed by name",
        _ps(env=[{"value": "debug"}]),
        "spec.env[0].name: Required value",
    ),
    (
        "env duplicate name",
        "one value per variable (list map key)",
        _ps(env=[{"name": "LEVEL", "value": "a"}, {"name": "LEVEL", "value": "b"}]),
        "spec.env[1]: Duplicate value",
    ),
    (
        "env value too long",
        "at most 4096 characters",
        _ps(env=[{"name": "LEVEL", "value": "v" * 4097}]),
        "spec.env[0].value: Too long: may not be more than 4096 bytes",
    ),
    (
        "env value not a string",
        "values are literal strings",
        _ps(env=[{"name": "LEVEL", "value": 3}]),
        "spec.env[0].value in body must be of type string",
    ),
    (
        "env value and valueFrom",
        "a variable has one value (CEL)",
        _ps(env=[{"name": "T", "value": "v", "valueFrom": {"secretKeyRef": _KEY}}]),
        "an env variable has a value or a valueFrom, not both",
    ),
    (
        "env valueFrom empty",
        "valueFrom names a Secret's or a ConfigMap's key (CEL)",
        _ps(env=[{"name": "T", "valueFrom": {}}]),
        "valueFrom takes exactly one of secretKeyRef and configMapKeyRef",
    ),
    (
        "env valueFrom both kinds",
        "one source per variable (CEL)",
        _ps(env=[{"name": "T", "valueFrom": {"secretKeyRef": _KEY, "configMapKeyRef": _KEY}}]),
        "valueFrom takes exactly one of secretKeyRef and configMapKeyRef",
    ),
    (
        "env secretKeyRef without key",
        "a key of the Secret, not all of it",
        _ps(env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s"}}}]),
        "spec.env[0].valueFrom.secretKeyRef.key: Required value",
    ),
    (
        "env valueFrom fieldRef",
        "only Secret and ConfigMap keys: fieldRef would be pruned (Strict)",
        _ps(env=[{"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
        'unknown field "spec.env[0].valueFrom.fieldRef"',
    ),
    (
        "volumeMount relative path",
        "a mount path is absolute",
        _ps(volumeMounts=[{"name": "data", "mountPath": "mnt/x"}]),
        "spec.volumeMounts[0].mountPath in body should match",
    ),
    (
        "volumeMount subPath leaving the volume",
        "no '..' in a subPath",
        _ps(volumeMounts=[{"name": "data", "mountPath": "/mnt/x", "subPath": "a/../.."}]),
        "spec.volumeMounts[0].subPath in body should match",
    ),
    (
        "volumeMount duplicate path",
        "one volume per path (list map key)",
        _ps(volumeMounts=[{"name": "a", "mountPath": "/m"}, {"name": "b", "mountPath": "/m"}]),
        "spec.volumeMounts[1]: Duplicate value",
    ),
    (
        "securityContext",
        "only the profile sets it: a securityContext would be pruned (Strict)",
        _ps(securityContext={"privileged": True}),
        'unknown field "spec.securityContext"',
    ),
    (
        "resources",
        "Kubernetes refuses resources on an ephemeral container: pruned (Strict)",
        _ps(resources={"limits": {"cpu": "1"}}),
        'unknown field "spec.resources"',
    ),
    (
        "stdin as a string",
        "a flag is a boolean",
        _ps(stdin="yes"),
        "spec.stdin in body must be of type boolean",
    ),
    (
        "tty as a number",
        "a flag is a boolean",
        _ps(tty=1),
        "spec.tty in body must be of type boolean",
    ),
    (
        "targetContainer with capitals",
        "container names are DNS labels",
        _ps(targetContainer="Main"),
        "spec.targetContainer in body should match",
    ),
    (
        "targetContainer empty",
        "no target is written by omitting the field",
        _ps(targetContainer=""),
        "spec.targetContainer in body should be at least 1 chars long",
    ),
    (
        "targetContainer a path",
        "a container of the pod itself, by name: nothing that could name another pod",
        _ps(targetContainer="other-pod/main"),
        "spec.targetContainer in body should match",
    ),
    (
        "targetContainer too long",
        "at most 63 characters",
        _ps(targetContainer="c" * 64),
        "spec.targetContainer: Too long: may not be more than 63 bytes",
    ),
    (
        "mode lower-case",
        "the modes are Ephemeral and Copy, spelled as the API spells enums",
        _ps(mode="copy"),
        'spec.mode: Unsupported value: "copy"',
    ),
    (
        "mode not a string",
        "a mode is named",
        _ps(mode=True),
        "spec.mode in body must be of type string",
    ),
    (
        "targetContainer in mode Copy",
        "every container of a copy shares one process namespace: there is nothing to target",
        _ps(mode="Copy", targetContainer="main"),
        "targetContainer is for mode Ephemeral",
    ),
    (
        "legacy profile",
        "kubectl debug's legacy profile is not offered",
        _ps(profile="legacy"),
        'spec.profile: Unsupported value: "legacy"',
    ),
    (
        "capitalised profile",
        "enums are case-sensitive",
        _ps(profile="Restricted"),
        'spec.profile: Unsupported value: "Restricted"',
    ),
    (
        "maxPods zero",
        "a debugger for no pod is a mistake",
        _ps(maxPods=0),
        "spec.maxPods in body should be greater than or equal to 1",
    ),
    (
        "maxPods above 100",
        "the blast radius is bounded",
        _ps(maxPods=101),
        "spec.maxPods in body should be less than or equal to 100",
    ),
    (
        "maxPods as a string",
        "the schema is typed",
        _ps(maxPods="10"),
        "spec.maxPods in body must be of type integer",
    ),
    (
        "activeDeadlineSeconds zero",
        "a debugger that ends at its creation is a mistake",
        _ps(activeDeadlineSeconds=0),
        "spec.activeDeadlineSeconds in body should be greater than or equal to 1",
    ),
    (
        "activeDeadlineSeconds negative",
        "a deadline in the past is a mistake",
        _ps(activeDeadlineSeconds=-60),
        "spec.activeDeadlineSeconds in body should be greater than or equal to 1",
    ),
    (
        "activeDeadlineSeconds above 30 days",
        "a debug session is bounded",
        _ps(activeDeadlineSeconds=30 * 24 * 3600 + 1),
        "spec.activeDeadlineSeconds in body should be less than or equal to 2592000",
    ),
    (
        "activeDeadlineSeconds as a duration string",
        "seconds, as a Job's, not a duration",
        _ps(activeDeadlineSeconds="1h"),
        "spec.activeDeadlineSeconds in body must be of type integer",
    ),
    (
        "unknown spec field",
        "container for the spec's own fields is refused, not pruned (Strict)",
        _ps(container={"image": "busybox"}),
        'unknown field "spec.container"',
    ),
    *_unknown("PodDebugger"),
]

CASES: list[Case] = [
    Case(kind, name, why, change, message)
    for kind, table in (
        ("PodSet", PODSET),
        ("ConfigMapSync", CONFIGMAPSYNC),
        ("SecretSync", SECRETSYNC),
        ("PodDebugger", PODDEBUGGER),
    )
    for name, why, change, message in table
]
"""Every invalid object of the corpus."""
