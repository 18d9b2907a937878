"""PodDebugger API (debug.opsuite.dev/v1alpha1): the single source of truth for the CRD schema."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, model_validator

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

GROUP = "debug.opsuite.dev"
VERSION = "v1alpha1"
KIND = "PodDebugger"
PLURAL = "poddebuggers"
DESCRIPTION = (
    "PodDebugger adds an ephemeral debug container (kubectl debug, declared) to "
    "every pod of its namespace that its selector matches."
)
SHORT_NAMES = ("pdbg",)
API_VERSION = f"{GROUP}/{VERSION}"

MAX_PODS_LIMIT = 100
"""Upper bound of spec.maxPods (and so of status.debuggedPods)."""
MAX_FAILED_PODS = 20
MAX_STATE_REASON = 128
MAX_STATE_MESSAGE = 256
"""Longest kubelet message kept per debug container in status.debuggedPods (200 entries at
most: the status stays well under the object size limit)."""
NON_ROOT_USER = 65532
"""The user the restricted profile runs a debug container as when spec.runAsUser is omitted:
the conventional "nonroot" user of distroless and kubebuilder images. Any uid other than 0
would do; images that run as root (busybox...) have no such user, which is fine."""
MAX_USER_ID = 2**31 - 1
"""The API server refuses a pod's runAsUser above this (apimachinery IsValidUserID)."""
MAX_ACTIVE_DEADLINE = 30 * 24 * 3600
"""Upper bound of spec.activeDeadlineSeconds: 30 days (a debug session is short; without the
field there is no deadline at all)."""
CONTAINER_PREFIX = "pdbg-"
"""Every ephemeral container a PodDebugger adds is named ``pdbg-<debugger>-<name hash><spec
hash>`` (:func:`poddebugger_operator.names.container_name`)."""

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"

Profile = Literal["general", "baseline", "restricted", "netadmin", "sysadmin"]
Mode = Literal["Ephemeral", "Copy"]
ContainerState = Literal["Running", "Waiting", "Terminated", "Unknown"]

_SELECTOR_NOT_EMPTY = cel(
    "(has(self.matchLabels) && size(self.matchLabels) > 0) || "
    "(has(self.matchExpressions) && size(self.matchExpressions) > 0)",
    "selector must not be empty: an empty selector would debug every pod of the namespace",
    reason="FieldValueRequired",
)

ROOT_WHEN_RESTRICTED = (
    "runAsUser 0 (root) is not allowed with profile restricted, which runs the debug container "
    "as non-root: omit runAsUser (65532), give another uid, or choose another profile"
)
_NOT_ROOT_WHEN_RESTRICTED = cel(
    # profile has a default, so the API server always has it here; has() keeps the rule total.
    "!has(self.runAsUser) || self.runAsUser != 0 "
    "|| (has(self.profile) && self.profile != 'restricted')",
    ROOT_WHEN_RESTRICTED,
    field_path=".runAsUser",
    reason="FieldValueForbidden",
)

Argument = Annotated[str, Field(max_length=4096)]

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CONFIG_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
MOUNT_PATH_PATTERN = r"^/[^:]*$"
SUB_PATH_PATTERN = r"^(?:[^/.]|\.[^/.]|\.\.[^/])[^/]*(?:/(?:[^/.]|\.[^/.]|\.\.[^/])[^/]*)*$"
"""Relative, no '..' component, no empty component (the API server refuses '..' too)."""
MAX_VOLUME_MOUNTS = 16

ONE_SOURCE = "valueFrom takes exactly one of secretKeyRef and configMapKeyRef"
_ONE_SOURCE = cel(
    "has(self.secretKeyRef) != has(self.configMapKeyRef)", ONE_SOURCE, reason="FieldValueInvalid"
)
VALUE_OR_SOURCE = "an env variable has a value or a valueFrom, not both"
_VALUE_OR_SOURCE = cel(
    "!has(self.valueFrom) || !has(self.value) || self.value == ''",
    VALUE_OR_SOURCE,
    reason="FieldValueInvalid",
)


class KeyRef(KubeModel):
    """A key of a Secret or ConfigMap of the PodDebugger's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
    """The Secret's or ConfigMap's name (in the PodDebugger's namespace). Its requester must
    be allowed to get it: checked at admission and before every injection."""
    key: str = Field(min_length=1, max_length=253, pattern=CONFIG_KEY_PATTERN)
    """The key."""
    optional: bool | None = None
    """Start the container even when the object or key is missing (the variable is unset)."""


class EnvVarSource(KubeModel):
    """Where a variable's value comes from: exactly one of a Secret's or a ConfigMap's key."""

    model_config = ConfigDict(json_schema_extra=validations(_ONE_SOURCE))

    secret_key_ref: KeyRef | None = None
    """A key of a Secret the requester may get."""
    config_map_key_ref: KeyRef | None = None
    """A key of a ConfigMap the requester may get."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        # The CEL rule above, for objects the API server did not validate.
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError(ONE_SOURCE)
        return self


class EnvVar(KubeModel):
    """An environment variable of the debug container: a literal value or a key of a Secret
    or ConfigMap the requester may read."""

    model_config = ConfigDict(json_schema_extra=validations(_VALUE_OR_SOURCE))

    name: str = Field(min_length=1, max_length=256, pattern=ENV_NAME_PATTERN)
    """Variable name."""
    value: str = Field(default="", max_length=4096)
    """Variable value."""
    value_from: EnvVarSource | None = None
    """Take the value from a Secret's or ConfigMap's key instead (not with value)."""

    @model_validator(mode="after")
    def _value_or_source(self) -> Self:
        # The CEL rule above, for objects the API server did not validate.
        if self.value and self.value_from is not None:
            raise ValueError(VALUE_OR_SOURCE)
        return self


class VolumeMount(KubeModel):
    """A volume of the pod mounted in the debug container (kubectl debug --custom)."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """The pod's volume (spec.volumes[].name). A pod without it, or whose volume of that name
    holds Secrets or service account tokens, gets no container (status.failedPods)."""
    mount_path: str = Field(min_length=1, max_length=1024, pattern=MOUNT_PATH_PATTERN)
    """Absolute path in the debug container, without ':'."""
    read_only: bool | None = None
    """Mount it read-only (else as the volume allows)."""
    sub_path: str | None = Field(
        default=None, min_length=1, max_length=1024, pattern=SUB_PATH_PATTERN
    )
    """Mount this relative path of the volume only (no '..', not absolute)."""


TARGET_IN_COPY = (
    "targetContainer is for mode Ephemeral: in mode Copy every container of the copy shares "
    "one process namespace (shareProcessNamespace, as kubectl debug --copy-to --share-processes)"
)
_NO_TARGET_IN_COPY = cel(
    "!has(self.targetContainer) || !has(self.mode) || self.mode != 'Copy'",
    TARGET_IN_COPY,
    field_path=".targetContainer",
    reason="FieldValueForbidden",
)


class PodDebuggerSpec(KubeModel):
    """Which pods get a debug container, and what that container is."""

    model_config = ConfigDict(
        json_schema_extra=validations(_NOT_ROOT_WHEN_RESTRICTED, _NO_TARGET_IN_COPY)
    )

    selector: LabelSelector = Field(json_schema_extra=validations(_SELECTOR_NOT_EMPTY))
    """Pods of the PodDebugger's namespace whose labels match get the debug container. Must
    not be empty."""
    image: str = Field(min_length=1, max_length=512)
    """Image of the debug container (kubectl debug --image)."""
    command: list[Argument] | None = Field(default=None, max_length=64)
    """Entrypoint of the debug container; the image's when omitted."""
    args: list[Argument] | None = Field(default=None, max_length=64)
    """Arguments to the entrypoint."""
    env: list[EnvVar] | None = Field(
        default=None, max_length=64, json_schema_extra=list_map("name")
    )
    """Environment variables of the debug container (kubectl debug --env)."""
    volume_mounts: list[VolumeMount] | None = Field(
        default=None,
        max_length=MAX_VOLUME_MOUNTS,
        json_schema_extra=list_map("mountPath"),
    )
    """Volumes of each selected pod to mount in the debug container (kubectl debug --custom
    volumeMounts). Volumes that hold Secrets or service account tokens (secret, projected
    with secret or serviceAccountToken sources) are never mounted: use env valueFrom
    secretKeyRef, which checks that the requester may get the Secret. There is no resources
    field (Kubernetes refuses resources on an ephemeral container) and no securityContext
    field (the profile's alone applies)."""
    stdin: bool = False
    """Keep stdin open (kubectl debug -i); attach with kubectl attach."""
    tty: bool = False
    """Allocate a TTY (kubectl debug -t)."""
    target_container: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN
    )
    """Share the process namespace of this container of the pod (kubectl debug --target)."""
    profile: Profile = "restricted"
    """Security profile, as kubectl debug --profile sets the container's securityContext:
    restricted (default: non-root, no capabilities, no privilege escalation, RuntimeDefault
    seccomp), baseline (none), general (SYS_PTRACE), netadmin (NET_ADMIN, NET_RAW) or sysadmin
    (privileged: refused unless the operator runs with --allow-sysadmin-profile)."""
    run_as_user: int | None = Field(
        default=None, ge=0, le=MAX_USER_ID, json_schema_extra={"format": "int64"}
    )
    """The uid the debug container runs as (securityContext.runAsUser), whatever the image's
    USER. With profile restricted it defaults to 65532, so that images which run as root
    (busybox...) start under runAsNonRoot instead of failing with CreateContainerConfigError;
    0 is refused there. With other profiles it is set only when given (the image's user
    otherwise)."""
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, le=MAX_ACTIVE_DEADLINE, json_schema_extra={"format": "int64"}
    )
    """Seconds after the PodDebugger's creation (metadata.creationTimestamp) after which no
    debug container is added any more, as a Job's activeDeadlineSeconds: Ready turns False
    (DeadlineExceeded). Containers already added stay and run until their process exits:
    Kubernetes cannot remove an ephemeral container. Raising it reopens the window; at most
    30 days; none when omitted."""
    max_pods: int = Field(default=10, ge=1, le=MAX_PODS_LIMIT)
    """At most this many pods get a debug container from this PodDebugger; further matching
    pods are reported (skippedPods)."""
    mode: Mode = "Ephemeral"
    """Ephemeral (default): add the debug container to each selected pod as an ephemeral
    container (kubectl debug). Copy: leave the pod alone and create a copy of it with the debug
    container added as a regular container (kubectl debug --copy-to --share-processes): all
    containers share one process namespace, the copy is unscheduled from the pod's node, has
    none of the pod's labels (no Service selects it), annotations, owners or probes, and is
    owned by the PodDebugger (deleted with it). The requester must be allowed to create pods
    in the namespace. An existing copy is never rewritten: delete it for one of a new spec."""

    @model_validator(mode="after")
    def _not_root_when_restricted(self) -> Self:
        # The CEL rules above, for objects the API server did not validate (tests, old objects).
        if self.profile == "restricted" and self.run_as_user == 0:
            raise ValueError(ROOT_WHEN_RESTRICTED)
        if self.mode == "Copy" and self.target_container is not None:
            raise ValueError(TARGET_IN_COPY)
        return self


class DebuggedPod(KubeModel):
    """A debug container this PodDebugger added to a pod."""

    pod: str = Field(max_length=253)
    """Pod name."""
    container: str = Field(max_length=63)
    """Ephemeral container name (mode Copy: the copy's debug container)."""
    copy_pod: str | None = Field(default=None, max_length=63)
    """Mode Copy: the name of the pod's copy, which holds the container."""
    image: str = Field(max_length=512)
    """Its image."""
    state: ContainerState
    """From the pod's status.ephemeralContainerStatuses: Running, Waiting, Terminated, or
    Unknown while the kubelet has not reported it."""
    reason: str | None = Field(default=None, max_length=MAX_STATE_REASON)
    """The kubelet's reason when Waiting (ContainerCreating; or an error:
    CreateContainerConfigError, ErrImagePull, ImagePullBackOff, InvalidImageName,
    CreateContainerError, RunContainerError, CrashLoopBackOff...) or Terminated (Completed,
    Error...)."""
    message: str | None = Field(default=None, max_length=MAX_STATE_MESSAGE)
    """The kubelet's message with that reason (shortened to 256 characters)."""
    exit_code: int | None = Field(default=None, json_schema_extra={"format": "int32"})
    """The exit code when Terminated."""


class FailedPod(KubeModel):
    """A pod that matches but could not be given the debug container."""

    pod: str = Field(max_length=253)
    """Pod name."""
    uid: str = Field(max_length=64)
    """Pod uid (a recreated pod of the same name is tried again)."""
    container: str = Field(max_length=63)
    """The ephemeral container that was refused."""
    reason: str = Field(min_length=1, max_length=128, pattern=REASON_PATTERN)
    """Rejected: the API server refused. Tried again after a backoff (1 minute, doubling with
    each refusal up to 1,000 s), so a refusal that a later change lifts (a namespace's Pod
    Security level relaxed, a quota raised) does not stay for good; at once when the spec or
    the pod changes. TargetContainerNotFound: the pod has no container (or init container)
    named spec.targetContainer; VolumeNotFound: no volume of a spec.volumeMounts name;
    VolumeNotAllowed: that volume holds Secrets or service account tokens; CopyNameTaken (mode
    Copy): another pod holds the copy's name, until it is free. For these four nothing is
    sent, and the pod takes no maxPods slot."""
    message: str = Field(max_length=1024)
    """The API server's message."""
    attempts: int | None = Field(default=None, ge=1)
    """How many times in a row the API server refused it."""
    last_attempt_time: str | None = Field(
        None, pattern=RFC3339_PATTERN, json_schema_extra={"format": "date-time"}
    )
    """When it last refused (RFC3339): the next attempt is a backoff later."""


class PodDebuggerStatus(KubeModel):
    """Observed state of a PodDebugger."""

    matched_pods: int | None = Field(default=None, ge=0)
    """Pods of the namespace matching the selector (terminated ones excluded)."""
    debugged_count: int | None = Field(default=None, ge=0)
    """Matching pods holding the debug container of the current spec."""
    skipped_pods: int | None = Field(default=None, ge=0)
    """Matching pods left without a debug container because of maxPods."""
    debugged_pods: list[DebuggedPod] | None = Field(
        default=None,
        max_length=2 * MAX_PODS_LIMIT,
        json_schema_extra=list_map("pod", "container"),
    )
    """Debug containers of this PodDebugger in matching pods, with their state: at most 200,
    those of the current spec first, then older ones by pod name (the list is sorted by pod
    and container). debuggedPodsTotal counts them all: when it is larger than this list, the
    list is truncated."""
    debugged_pods_total: int | None = Field(default=None, ge=0)
    """Debug containers of this PodDebugger in matching pods, all of them: debuggedPods lists
    the first 200 (current spec first), so a total above its length means it is truncated."""
    failed_pods: list[FailedPod] | None = Field(
        default=None, max_length=MAX_FAILED_PODS, json_schema_extra=list_map("pod")
    )
    """Pods that could not be given the debug container (the API server refused it, or the pod
    lacks the target container or a volume to mount, or that volume holds credentials), with
    why; at most 20."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: ConditionList | None = None
    """Ready: True (Debugged) when every selected pod holds the debug container of the current
    spec and each is Running or Terminated with exit code 0 (NoMatchingPods when none
    match); False while some are being created or not reported yet (Starting), when one
    failed (ContainerFailed), when the API server refused some (InjectionFailed), when the
    active deadline has passed (DeadlineExceeded: nothing more is added; Degraded still
    reports the containers' failures), or when nothing is to be done (InvalidSpec;
    PolicyMissing: the authorization admission policy is not in force, or was not when the
    PodDebugger was created; ProfileNotAllowed: profile sysadmin without the operator's
    consent; ImageNotAllowed). Degraded: True with ContainerFailed (a debug container of the
    current spec Waiting with an error reason or Terminated with a non-zero exit code: pods,
    containers and the kubelet's reasons in the message), InjectionFailed, InvalidSpec,
    PolicyMissing, ProfileNotAllowed or ImageNotAllowed; else False (AsExpected)."""


IMAGE_POLICY_KIND = "DebugImagePolicy"
IMAGE_POLICY_PLURAL = "debugimagepolicies"
MAX_ALLOWED_PREFIXES = 64


class DebugImagePolicySpec(KubeModel):
    """Which images PodDebuggers may use: the parameter of the image allowlist admission policy."""

    allowed_prefixes: list[Annotated[str, Field(min_length=1, max_length=255)]] = Field(
        default_factory=list, max_length=MAX_ALLOWED_PREFIXES
    )
    """Image prefixes a PodDebugger's image must be under (e.g. registry.example.com/debug/ or
    busybox), compared as docker references on a path component boundary: busybox admits
    docker.io/library/busybox:1, not busybox.attacker.io/x; an image must then name its registry
    (busybox:1 is refused). Empty allows every image."""


class DebugImagePolicyStatus(KubeModel):
    """A DebugImagePolicy has no status: the API server reads it as an admission parameter."""
