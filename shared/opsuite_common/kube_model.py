"""Pydantic base model and reusable Kubernetes types for operator custom resources.

Every operator model derives from :class:`KubeModel`: camelCase aliases on the wire, unknown
keys rejected. Attribute docstrings become the descriptions of the generated schemas
(``kubectl explain``), read by the generators (:mod:`opsuite_packaging.descriptions`), not by
every process that imports a model.

CEL rules (``x-kubernetes-validations``) are declared in exactly one way, with
``validations(cel(...), ...)`` passed as ``json_schema_extra``:

* on a field: ``replicas: int = Field(1, json_schema_extra=validations(cel("self <= 100", "...")))``
  (``self`` is the field value);
* on a model: ``model_config = ConfigDict(json_schema_extra=validations(cel(...)))``
  (``self`` is the object).

Rules that iterate over a list or map (``all``, ``exists``, ``map``...) should bound it and the
strings compared with ``max_length``: the API server rejects rules whose estimated cost is too
high. :mod:`opsuite_packaging.crd` keeps ``dict[str, Any]`` and ``Any`` fields opaque
(``x-kubernetes-preserve-unknown-fields``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict, JsonValue

QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
"""Label keys and condition types: optional DNS-subdomain prefix and a name (upstream pattern)."""
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
)

CelReason: TypeAlias = Literal[
    "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"
]
ConditionStatus: TypeAlias = Literal["True", "False", "Unknown"]
MAX_SELECTOR_ENTRIES = 32
"""Bound on selector entries and values, so CEL rules over selectors stay within budget."""
MAX_LABELS = 64
"""Bound on template labels, for the same reason."""
LabelKey = Annotated[str, Field(max_length=316, pattern=QUALIFIED_NAME_PATTERN)]
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class KubeModel(BaseModel):
    """Base for operator models: camelCase aliases, no unknown keys."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
    )

    def to_kube(self) -> dict[str, Any]:
        """Serialize for the API server: camelCase keys, JSON types, ``None`` fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def _single_line(value: str, what: str) -> None:
    if not value.strip() or "\n" in value or "\r" in value:
        raise ValueError(f"CEL {what} must be a non-empty single line, got {value!r}")


def cel(
    rule: str, message: str, *, field_path: str | None = None, reason: CelReason | None = None
) -> JsonDict:
    """Build one ``x-kubernetes-validations`` entry; wrap entries with :func:`validations`."""
    if not rule.strip():
        raise ValueError("CEL rule must not be empty")
    _single_line(message, "message")
    entry: JsonDict = {"rule": rule, "message": message}
    if field_path is not None:
        _single_line(field_path, "fieldPath")
        if not field_path.startswith("."):
            raise ValueError(f"CEL fieldPath must start with '.', got {field_path!r}")
        entry["fieldPath"] = field_path
    if reason is not None:
        if reason not in get_args(CelReason):
            raise ValueError(f"CEL reason must be one of {get_args(CelReason)}, got {reason!r}")
        entry["reason"] = reason
    return entry


def validations(*rules: JsonDict) -> JsonDict:
    """``json_schema_extra`` value attaching CEL rules (from :func:`cel`) to a field or model."""
    entries: list[JsonValue] = list(rules)
    return {"x-kubernetes-validations": entries}


def list_map(*keys: str) -> JsonDict:
    """``json_schema_extra`` value making a list of objects a map keyed by ``keys`` (SSA merge)."""
    names: list[JsonValue] = list(keys)
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": names}


_ATOMIC_LIST: JsonDict = {"x-kubernetes-list-type": "atomic"}


class LabelSelectorRequirement(KubeModel):
    """A selector requirement: a key, an operator and, for In/NotIn, the values."""

    key: LabelKey
    """The label key that the selector applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: list[LabelValue] | None = Field(
        default=None, max_length=MAX_SELECTOR_ENTRIES, json_schema_extra=_ATOMIC_LIST
    )
    """Non-empty for In and NotIn, empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _check_values(self) -> Self:
        if (self.operator in ("In", "NotIn")) != bool(self.values):
            raise ValueError("In and NotIn need values, Exists and DoesNotExist take none")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (a missing key satisfies NotIn)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in (self.values or ())
        if self.operator == "NotIn":
            return not present or labels[self.key] not in (self.values or ())
        return present == (self.operator == "Exists")

    def selector_string(self) -> str:
        """The requirement in ``kubectl -l`` syntax, e.g. ``tier in (a,b)`` or ``!foo``."""
        values = ",".join(sorted(set(self.values or ())))
        return {
            "In": f"{self.key} in ({values})",
            "NotIn": f"{self.key} notin ({values})",
            "Exists": self.key,
            "DoesNotExist": f"!{self.key}",
        }[self.operator]


class LabelSelector(KubeModel):
    """A label query over a set of resources; an empty selector matches everything."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: dict[LabelKey, LabelValue] | None = Field(
        default=None, max_length=MAX_SELECTOR_ENTRIES
    )
    """Labels that must all be present with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=MAX_SELECTOR_ENTRIES, json_schema_extra=_ATOMIC_LIST
    )
    """Requirements that must all hold."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every matchLabels entry and every expression."""
        return all(labels.get(k) == v for k, v in (self.match_labels or {}).items()) and all(
            r.matches(labels) for r in self.match_expressions or ()
        )

    def selector_string(self) -> str:
        """The selector in ``kubectl get -l`` syntax, requirements sorted by key."""
        parts = [(k, f"{k}={v}") for k, v in (self.match_labels or {}).items()]
        parts += [(r.key, r.selector_string()) for r in self.match_expressions or ()]
        return ",".join(text for _, text in sorted(parts, key=lambda part: part[0]))


class Condition(KubeModel):
    """One aspect of the current state of the resource (metav1.Condition)."""

    type: str = Field(max_length=316, pattern=QUALIFIED_NAME_PATTERN)
    """Type of the condition, in CamelCase or foo.example.com/CamelCase."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation the condition was set for."""
    last_transition_time: str = Field(
        pattern=RFC3339_PATTERN, json_schema_extra={"format": "date-time"}
    )
    """When the status last changed (RFC3339)."""
    reason: str = Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)
    """Programmatic identifier of the reason for the last transition, in CamelCase."""
    message: str = Field(max_length=32768)
    """Human readable details about the transition; may be empty."""


ConditionList = Annotated[list[Condition], Field(json_schema_extra=list_map("type"))]
"""``status.conditions``: a list map keyed by ``type``, as upstream."""


class TemplateMetadata(KubeModel):
    """The metadata a template stamps onto the objects created from it."""

    labels: dict[LabelKey, LabelValue] | None = Field(default=None, max_length=MAX_LABELS)
    """Labels of the created objects."""
    annotations: dict[str, str] | None = None
    """Annotations of the created objects."""


POD_SPEC_PROPERTIES: JsonDict = {
    "containers": {
        "type": "array",
        "minItems": 1,
        "items": {"type": "object", "additionalProperties": True},
    }
}
"""The fields of an opaque pod spec that its schema declares (a template may declare more)."""
POD_SPEC_SCHEMA: JsonDict = {"required": ["containers"], "properties": POD_SPEC_PROPERTIES}


class PodTemplateSpec(KubeModel):
    """A pod template; the pod spec is kept opaque and validated when the pod is created."""

    metadata: TemplateMetadata | None = None
    """Labels and annotations of the created pods."""
    spec: dict[str, Any] = Field(json_schema_extra=POD_SPEC_SCHEMA)
    """Pod spec (core/v1 PodSpec): at least one container; the API server validates the rest
    when the pods are created."""

    @field_validator("spec")
    @classmethod
    def _has_containers(cls, spec: dict[str, Any]) -> dict[str, Any]:
        containers = spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise ValueError("containers must list at least one container")
        return spec
