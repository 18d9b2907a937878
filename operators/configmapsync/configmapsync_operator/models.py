"""ConfigMapSync API (sync.opsuite.dev/v1alpha1): the single source of truth for the CRD schema."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

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

SECRET_KIND = "SecretSync"
SECRET_PLURAL = "secretsyncs"
SECRET_DESCRIPTION = (
    "SecretSync copies a Secret (its type kept; never a service-account token) into other "
    "namespaces (listed, or selected by label) and keeps the copies identical to the source."
)
SECRET_SHORT_NAMES = ("secsync",)
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
"""The Secret type a SecretSync never copies: a token authenticates as its ServiceAccount
wherever it is read."""

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
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
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


def _not_onto_itself(object_kind: str) -> JsonDict:
    return cel(
        "!has(self.sourceNamespace) || !has(self.destinationNamespaces) "
        "|| !(self.sourceNamespace in self.destinationNamespaces)",
        f"the source namespace cannot be a destination: a {object_kind} cannot be synced "
        "onto itself",
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


def _rules(object_kind: str) -> JsonDict:
    """The spec's CEL rules, their messages naming the kind of object copied."""
    return validations(
        _HAS_TARGETS, _not_onto_itself(object_kind), _LISTED_NOT_EXCLUDED, _ONE_KEY_FILTER
    )


class SyncSpec(KubeModel, ABC):
    """Into which namespaces, and how: what a ConfigMapSync and a SecretSync have in common
    (each adds the name of its source, :attr:`source_name`)."""

    source_namespace: NamespaceName | None = None
    """Namespace of the source. Default: the sync's own namespace. The source is only ever
    read."""
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
    any run of characters. A namespace that becomes excluded loses the copy this sync owns
    there; nothing else in it is touched."""
    conflict_policy: ConflictPolicy = "Skip"
    """What to do with an object of the same name in a destination that this sync does not
    own: Skip (default) leaves it untouched and reports a Conflict; Overwrite takes it over. An
    object owned by another sync is never taken over."""
    copy_labels: list[KeyPattern] | None = Field(
        default=None,
        max_length=MAX_COPIED_KEYS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Labels of the source that the copies carry: keys, or patterns where * matches any run of
    characters (["*"] copies all). Default: none (the data is copied as includeKeys and
    excludeKeys say). The operator's own sync.opsuite.dev/ keys are never copied."""
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
    """Copy only these keys of the data (a ConfigMap's binaryData too): keys, or patterns where
    * matches any run of characters. A key named here (not a pattern) that the source lacks is
    reported (Degraded, KeysMissing); the copies carry the keys that exist. Not with
    excludeKeys."""
    exclude_keys: list[DataKeyPattern] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KEY_FILTERS,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Copy every key of the data (a ConfigMap's binaryData too) but these (keys or patterns,
    as includeKeys). Not with includeKeys. Default (neither set): every key is copied."""
    deletion_policy: DeletionPolicy = "Delete"
    """What happens to the copies when this sync is deleted: Delete (default) removes
    them; Orphan keeps them without the operator's ownership label and annotations."""

    @property
    @abstractmethod
    def source_name(self) -> str:
        """The source's name (every copy's), from the field of the kind."""


class ConfigMapSyncSpec(SyncSpec):
    """Which ConfigMap to copy, and into which namespaces."""

    model_config = ConfigDict(json_schema_extra=_rules("ConfigMap"))

    config_map_name: ObjectName
    """Name of the source ConfigMap; every copy has the same name."""

    @property
    def source_name(self) -> str:
        """The source's name (every copy's)."""
        return self.config_map_name


class SecretSyncSpec(SyncSpec):
    """Which Secret to copy, and into which namespaces."""

    model_config = ConfigDict(json_schema_extra=_rules("Secret"))

    secret_name: ObjectName
    """Name of the source Secret; every copy has the same name and type. A Secret of type
    kubernetes.io/service-account-token is never copied (Degraded, SecretTypeNotCopied)."""

    @property
    def source_name(self) -> str:
        """The source's name (every copy's)."""
        return self.secret_name


class FailedTarget(KubeModel):
    """A destination namespace that does not hold a current copy, and why."""

    namespace: str = Field(max_length=63)
    """The destination namespace."""
    reason: str = Field(min_length=1, max_length=128, pattern=REASON_PATTERN)
    """Why: NotAllowedBySource, NotAcceptedByNamespace, Conflict, NamespaceMissing,
    WriteFailed, SourceNamespace, NamespaceNotWatched or Terminating."""
    message: str = Field(max_length=1024)
    """Details for people."""


class SyncStatus(KubeModel):
    """Observed state of a sync, of either kind."""

    source: str | None = Field(default=None, max_length=320)
    """The source as namespace/name."""
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


class ConfigMapSyncStatus(SyncStatus):
    """Observed state of a ConfigMapSync."""


class SecretSyncStatus(SyncStatus):
    """Observed state of a SecretSync (names, counts and reasons only: never a value)."""
