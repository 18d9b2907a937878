"""PodSet API (apps.opsuite.dev/v1alpha1): the single source of truth for the CRD schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from opsuite_common.kube_model import (
    POD_SPEC_PROPERTIES,
    POD_SPEC_SCHEMA,
    RFC3339_PATTERN,
    ConditionList,
    KubeModel,
    LabelSelector,
    PodTemplateSpec,
    cel,
    validations,
)

GROUP = "apps.opsuite.dev"
VERSION = "v1alpha1"
KIND = "PodSet"
PLURAL = "podsets"
DESCRIPTION = (
    "PodSet keeps a number of pods from a template running, like a ReplicaSet, "
    "with rolling updates and the scale subresource (kubectl scale, HPA)."
)
SHORT_NAMES = ("pset",)
NAME_LABEL = "apps.opsuite.dev/podset"
"""Label put on every pod of a PodSet that has no selector of its own (value: its name)."""

IntOrPercent = int | str
MAX_INT32 = 2**31 - 1
MAX_POD_NAMES = 100
"""How many pod names status.podNames lists at most (a status naming every one of 20,000 pods
would near etcd's object size limit, and change on every pod event)."""

_PERCENT_RULES = validations(
    cel(
        "type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",
        "must be a non-negative integer or a percentage such as 25%",
    )
)

_LABELS = "self.template.metadata.labels"
_SELECTOR_MATCHES_TEMPLATE = cel(
    "!has(self.selector) || ("
    f"has(self.template.metadata) && has({_LABELS}) && "
    "(!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, "
    f"k in {_LABELS} && {_LABELS}[k] == self.selector.matchLabels[k])) && "
    "(!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, "
    f"e.operator == 'In' ? (e.key in {_LABELS} && {_LABELS}[e.key] in e.values) : "
    f"e.operator == 'NotIn' ? (!(e.key in {_LABELS}) || !({_LABELS}[e.key] in e.values)) : "
    f"e.operator == 'Exists' ? e.key in {_LABELS} : !(e.key in {_LABELS}))))",
    "selector does not match template labels",
    field_path=".selector",
)
_SELECTOR_NOT_EMPTY = cel(
    "!has(self.selector) || "
    "(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || "
    "(has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",
    "an empty selector would match every pod in the namespace; omit it instead",
    field_path=".selector",
)
DEADLINE_MESSAGE = "progressDeadlineSeconds must be greater than minReadySeconds"
_DEADLINE_AFTER_MIN_READY = cel(
    "!has(self.progressDeadlineSeconds) || !has(self.minReadySeconds) || "
    "self.progressDeadlineSeconds > self.minReadySeconds",
    DEADLINE_MESSAGE,
    field_path=".progressDeadlineSeconds",
)
_SELECTOR_IMMUTABLE = cel(
    "has(self.selector) == has(oldSelf.selector) && "
    "(!has(self.selector) || self.selector == oldSelf.selector)",
    "selector is immutable",
    field_path=".selector",
)


RESTART_POLICY_MESSAGE = (
    "restartPolicy must be Always: a PodSet replaces pods that exit, so with Never or "
    "OnFailure they would be replaced at once, with no backoff"
)
_POD_SPEC_SCHEMA: JsonDict = {
    **POD_SPEC_SCHEMA,
    "properties": {
        **POD_SPEC_PROPERTIES,
        # Declared so that the CEL rule can read it (CEL sees only declared fields).
        "restartPolicy": {
            "type": "string",
            "description": "Always (the default), as for a ReplicaSet's pods.",
        },
    },
    **validations(
        cel(
            "!has(self.restartPolicy) || self.restartPolicy == 'Always'",
            RESTART_POLICY_MESSAGE,
            field_path=".restartPolicy",
        )
    ),
}


class PodSetTemplate(PodTemplateSpec):
    """A pod template; the pod spec is kept opaque and validated when the pod is created."""

    spec: dict[str, Any] = Field(json_schema_extra=_POD_SPEC_SCHEMA)
    """Pod spec (core/v1 PodSpec): at least one container, restartPolicy Always (or omitted);
    the API server validates the rest when the pods are created."""

    @field_validator("spec")
    @classmethod
    def _restarts_always(cls, spec: dict[str, Any]) -> dict[str, Any]:
        if spec.get("restartPolicy", "Always") != "Always":
            raise ValueError(RESTART_POLICY_MESSAGE)
        return spec


class RollingUpdate(KubeModel):
    """Bounds of a rolling update, as a Deployment's."""

    max_surge: IntOrPercent = Field("25%", json_schema_extra=_PERCENT_RULES)
    """Pods that may exist above the desired count during an update (number or percentage,
    rounded up). Default 25%."""
    max_unavailable: IntOrPercent = Field("25%", json_schema_extra=_PERCENT_RULES)
    """Pods that may be unavailable during an update (number or percentage, rounded down).
    Default 25%. When both resolve to 0, one pod may be unavailable."""


class UpdateStrategy(KubeModel):
    """How pods are replaced when the template changes."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "self.type == 'RollingUpdate' || !has(self.rollingUpdate)",
                "rollingUpdate is only allowed with type RollingUpdate",
            )
        )
    )

    type: Literal["RollingUpdate", "OnDelete"] = "RollingUpdate"
    """RollingUpdate replaces old pods within maxSurge/maxUnavailable; OnDelete (ReplicaSet
    behaviour) uses the new template only for pods created after old ones are deleted."""
    rolling_update: RollingUpdate | None = None
    """Parameters of the RollingUpdate strategy."""


class PodSetSpec(KubeModel):
    """Desired state of a PodSet: how many pods, from which template."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            _SELECTOR_NOT_EMPTY,
            _SELECTOR_MATCHES_TEMPLATE,
            _SELECTOR_IMMUTABLE,
            _DEADLINE_AFTER_MIN_READY,
        )
    )

    replicas: int = Field(1, ge=0, le=100_000)
    """Number of pods to keep running. Default 1. Also set through the scale subresource
    (kubectl scale, HorizontalPodAutoscaler)."""
    selector: LabelSelector | None = None
    """Pods this PodSet manages. Must match the template's labels and cannot change. When
    omitted, the operator labels its pods apps.opsuite.dev/podset=<name> and selects by that."""
    template: PodSetTemplate
    """Pod template of the pods to create. Its restartPolicy must be Always (or omitted)."""
    min_ready_seconds: int = Field(0, ge=0, le=86_400)
    """Seconds a pod must be ready before it counts as available. Default 0."""
    update_strategy: UpdateStrategy = Field(default_factory=UpdateStrategy)
    """How pods are replaced when the template changes. Default RollingUpdate, 25%/25%."""
    progress_deadline_seconds: int = Field(600, ge=1, le=MAX_INT32)
    """Seconds a rollout or scale may go without progress (a pod created, updated, deleted or
    turning ready or available) before Progressing turns False with reason
    ProgressDeadlineExceeded, as for a Deployment. Must be greater than minReadySeconds.
    Default 600."""

    revision_history_limit: int = Field(10, ge=0, le=MAX_INT32)
    """Old templates kept as ControllerRevisions (named <podset>-<hash>) besides the current
    one and those of running pods, for going back to one. Default 10, as a Deployment's."""
    paused: bool = False
    """While true, template changes wait: no pod is replaced for a new template, and the
    Progressing condition is Unknown with reason Paused (no progress deadline runs). Scaling
    (replicas, the scale subresource, an HPA) goes on. Setting it back to false rolls out the
    waiting template, as for a Deployment. Default false."""

    @model_validator(mode="after")
    def _deadline_after_min_ready(self) -> PodSetSpec:
        if self.progress_deadline_seconds <= self.min_ready_seconds:
            raise ValueError(DEADLINE_MESSAGE)
        return self


class PodSetStatus(KubeModel):
    """Observed state of a PodSet."""

    replicas: int = Field(0, ge=0)
    """Active pods (not terminated, not being deleted)."""
    ready_replicas: int = Field(0, ge=0)
    """Active pods whose Ready condition is True."""
    available_replicas: int = Field(0, ge=0)
    """Ready pods that have been ready for at least minReadySeconds."""
    updated_replicas: int = Field(0, ge=0)
    """Active pods created from the current template."""
    pod_names: list[str] | None = Field(None, max_length=MAX_POD_NAMES)
    """Names of the active pods, sorted: the first 100 when there are more (replicas counts
    them all)."""
    selector: str | None = None
    """The label selector of the pods in string form (used by the scale subresource and HPA)."""
    observed_generation: int | None = Field(None, ge=0)
    """The .metadata.generation this status describes."""
    update_revision: str | None = None
    """The ControllerRevision of the current template (<podset>-<hash>)."""
    current_revision: str | None = None
    """The ControllerRevision the pods ran before the rollout in flight; the update revision
    once every pod is from the current template."""
    last_progress_time: str | None = Field(
        None, pattern=RFC3339_PATTERN, json_schema_extra={"format": "date-time"}
    )
    """When the last (or current) rollout or scale last made progress (a Deployment keeps this
    as its Progressing condition's lastUpdateTime); progressDeadlineSeconds counts from it."""
    conditions: ConditionList | None = None
    """Ready, Available, Progressing and Degraded."""
