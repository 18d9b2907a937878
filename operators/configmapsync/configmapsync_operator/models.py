"""ConfigMapSync API (sync.opsuite.dev/v1alpha1): the single source of truth for the CRD schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from opsuite_common.kube_model import (
    REASON_PATTERN,
    RFC3339_PATTERN,
    ConditionList,
    KubeModel,
    LabelSelector,
    cel,
    list_map,
    validations,
)

GROUP = "sync.opsuite.dev"
VERSION = "v1alpha1"
KIND = "ConfigMapSync"
PLURAL = "configmapsyncs"
DESCRIPTION = (
    "ConfigMapSync copies a ConfigMap into other namespaces (listed, or selected "
    "by label) and keeps the copies identical to the source."
)
SHORT_NAMES = ("cms",)
API_VERSION = f"{GROUP}/{VERSION}"

FINALIZER = "sync.opsuite.dev/copies"
"""Put on every ConfigMapSync by earlier versions, which cleaned up the copies before letting
it go. No longer used (with the operator uninstalled it kept ConfigMapSyncs, and so their
namespaces, from ever being deleted): removed where found, after the clean-up it promised."""
OWNER_LABEL = "sync.opsuite.dev/owner-uid"
"""On every copy: the uid of the ConfigMapSync that owns it. The operator only ever updates or
deletes ConfigMaps carrying the uid of one of its ConfigMapSyncs here."""
OWNER_ANNOTATION = "sync.opsuite.dev/owner"
"""On every copy: ``<namespace>/<name>/<uid>`` of the owning ConfigMapSync (for people)."""
SOURCE_ANNOTATION = "sync.opsuite.dev/source"
"""On every copy: ``<namespace>/<name>`` of the ConfigMap it copies."""
DELETION_POLICY_ANNOTATION = "sync.opsuite.dev/deletion-policy"
"""On every copy: the owner's deletionPolicy, so that a copy whose ConfigMapSync went while the
operator was away is still deleted or released as its owner said."""
BOOKKEEPING_PREFIX = "sync.opsuite.dev/"
"""Labels and annotations under this prefix are the operator's own and never copied."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's client-side apply record of the source: never copied (it names the source)."""
ALLOWED_NAMESPACES_ANNOTATION = "sync.opsuite.dev/allowed-namespaces"
"""On a source ConfigMap: its owner's consent, a comma-separated list of the namespaces copies
may go to (names, or patterns where ``*`` matches any run of characters). A ConfigMap without
it is copied nowhere; the operator checks it on every pass, whatever admission policies say."""

ACCEPT_FROM_ANNOTATION = "sync.opsuite.dev/accept-from"
"""On a destination Namespace: its owner's consent, a comma-separated list of the namespaces
whose ConfigMaps may be copied into it (names, or patterns as above). Nothing is written into a
namespace without it: no copy, no take-over. Only who may update the Namespace object can set
it (not a tenant holding ``edit`` or ``admin`` in it), so a source's owner cannot consent for a
destination; the operator checks it on every pass, on every install path."""
PROTECTED_NAMESPACES = ("kube-*", "openshift-*")
"""Namespaces (patterns) that accept copies only from the source namespaces their
accept-from annotation names literally, never through a pattern; the operator's own namespace
too."""

MAX_DESTINATIONS = 256
MAX_FAILED_TARGETS = 20

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

NamespaceName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
ConfigMapName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
KeyPattern = Annotated[
    str,
    Field(min_length=1, max_length=317, pattern=r"^[A-Za-z0-9*]([-A-Za-z0-9_./*]*[A-Za-z0-9*])?$"),
]
"""A label or annotation key, or a pattern of keys where ``*`` matches any run of characters."""
MAX_COPIED_KEYS = 64
NamespacePattern = Annotated[
    str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$")
]
"""A namespace name, or a pattern of names where ``*`` matches any run of characters."""
MAX_EXCLUDED_NAMESPACES = 64
DataKeyPattern = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9*]+$")]
"""A data or binaryData key, or a pattern of keys where ``*`` matches any run of characters."""
MAX_KEY_FILTERS = 64

_HAS_TARGETS = cel(
    "(has(self.destinationNamespaces) && size(self.destinationNamespaces) > 0) "
    "|| has(self.namespaceSelector)",
    "set destinationNamespaces, namespaceSelector or both",
    reason="FieldValueRequired",
)
_NOT_ONTO_ITSELF = cel(
    "!has(self.sourceNamespace) || !has(self.destinationNamespaces) "
    "|| !(self.sourceNamespace in self.destinationNamespaces)",
    "the source namespace cannot be a destination: a ConfigMap cannot be synced onto itself",
    field_path=".destinationNamespaces",
    reason="FieldValueInvalid",
)

_LISTED_NOT_EXCLUDED = cel(
    "!has(self.destinationNamespaces) || !has(self.excludeNamespaces) "
    "|| self.destinationNamespaces.all(n, !(n in self.excludeNamespaces))",
    "a namespace cannot be both listed in destinationNamespaces and excluded by name",
    field_path=".excludeNamespaces",
    reason="FieldValueInvalid",
)
_ONE_KEY_FILTER = cel(
    "!(has(self.includeKeys) && has(self.excludeKeys))",
    "set includeKeys or excludeKeys, not both",
    field_path=".includeKeys",
    reason="FieldValueForbidden",
)

ConflictPolicy = Literal["Skip", "Overwrite"]
DeletionPolicy = Literal["Delete", "Orphan"]


class ConfigMapSyncSpec(KubeModel):
    """Which ConfigMap to copy, and into which namespaces."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            _HAS_TARGETS, _NOT_ONTO_ITSELF, _LISTED_NOT_EXCLUDED, _ONE_KEY_FILTER
        )
    )

    source_namespace: NamespaceName | None = None
    """Namespace of the source ConfigMap. Default: the ConfigMapSync's own namespace. The
    source is only ever read."""
    config_map_name: ConfigMapName
    """Name of the source ConfigMap; every copy has the same name."""
    destination_namespaces: list[NamespaceName] | None = Field(
        default=None,
        max_length=MAX_DESTINATIONS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Namespaces that get a copy. A namespace that does not exist yet is reported
    (NamespaceMissing) and filled once it appears. The source namespace is never a
    destination."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose labels match get a copy; a namespace that stops matching loses the
    copy. {} selects every namespace but the protected ones (kube-*, openshift-* and the
    operator's own), which are destinations only when listed in destinationNamespaces.
    Combined with destinationNamespaces, the union is used."""
    exclude_namespaces: list[NamespacePattern] | None = Field(
        default=None,
        max_length=MAX_EXCLUDED_NAMESPACES,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Namespaces that never get a copy, listed or selected: names, or patterns where * matches
    any run of characters. A namespace that becomes excluded loses the copy this ConfigMapSync
    owns there; nothing else in it is touched."""
    conflict_policy: ConflictPolicy = "Skip"
    """What to do with a ConfigMap of the same name in a destination that this ConfigMapSync
    does not own: Skip (default) leaves it untouched and reports a Conflict; Overwrite takes
    it over. A ConfigMap owned by another ConfigMapSync is never taken over."""
    copy_labels: list[KeyPattern] | None = Field(
        default=None,
        max_length=MAX_COPIED_KEYS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Labels of the source that the copies carry: keys, or patterns where * matches any run of
    characters (["*"] copies all). Default: none (data and binaryData are copied as
    includeKeys and excludeKeys say). The operator's own sync.opsuite.dev/ keys are never
    copied."""
    copy_annotations: list[KeyPattern] | None = Field(
        default=None,
        max_length=MAX_COPIED_KEYS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Annotations of the source that the copies carry, as copyLabels. Default: none. The
    operator's own sync.opsuite.dev/ keys and kubectl's last-applied-configuration are never
    copied."""
    include_keys: list[DataKeyPattern] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KEY_FILTERS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Copy only these keys of data and binaryData: keys, or patterns where * matches any run of
    characters. A key named here (not a pattern) that the source lacks is reported (Degraded,
    KeysMissing); the copies carry the keys that exist. Not with excludeKeys."""
    exclude_keys: list[DataKeyPattern] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KEY_FILTERS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Copy every key of data and binaryData but these (keys or patterns, as includeKeys). Not
    with includeKeys. Default (neither set): every key is copied."""
    deletion_policy: DeletionPolicy = "Delete"
    """What happens to the copies when this ConfigMapSync is deleted: Delete (default) removes
    them; Orphan keeps them without the operator's ownership label and annotations."""


class FailedTarget(KubeModel):
    """A destination namespace that does not hold a current copy, and why."""

    namespace: str = Field(max_length=63)
    """The destination namespace."""
    reason: str = Field(min_length=1, max_length=128, pattern=REASON_PATTERN)
    """Why: NotAllowedBySource, NotAcceptedByNamespace, Conflict, NamespaceMissing,
    WriteFailed, SourceNamespace, NamespaceNotWatched or Terminating."""
    message: str = Field(max_length=1024)
    """Details for people."""


class ConfigMapSyncStatus(KubeModel):
    """Observed state of a ConfigMapSync."""

    source: str | None = Field(default=None, max_length=320)
    """The source ConfigMap as namespace/name."""
    target_namespaces: int | None = Field(default=None, ge=0)
    """Destination namespaces: those listed plus those selected, without the source's."""
    synced_namespaces: int | None = Field(default=None, ge=0)
    """Destination namespaces holding a copy of the current source (the copies kept when the
    source is gone)."""
    failed_namespaces: int | None = Field(default=None, ge=0)
    """Destination namespaces without a current copy, for a reason listed in failedTargets."""
    failed_targets: list[FailedTarget] | None = Field(
        default=None, max_length=MAX_FAILED_TARGETS, json_schema_extra=list_map("namespace")
    )
    """The first failing destinations (by namespace), with reasons; at most 20."""
    last_sync_time: str | None = Field(
        default=None, pattern=RFC3339_PATTERN, json_schema_extra={"format": "date-time"}
    )
    """When the operator last wrote copies, or first found them all current."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: ConditionList | None = None
    """Ready (every destination holds a current copy) and Degraded (something needs a
    person: SourceNotFound, Conflict, WriteFailed, InvalidSpec...)."""
