"""Pure PodDebugger planning: the PodDebugger + cached pods -> ephemeral containers to add.

Rules:

* only pods of the PodDebugger's own namespace whose labels match its selector are considered;
  pods that are terminated (Succeeded, Failed) or being deleted are skipped;
* a pod is written only by adding one ephemeral container (pods/ephemeralcontainers); nothing
  else of a pod is ever changed, and nothing is ever removed;
* the container name is ``pdbg-<debugger name, shortened>-<hash of the debugger's full
  name><hash of the container spec>`` (:func:`container_name`): whether a pod already has it is
  read from its spec.ephemeralContainers, so restarts, resyncs and repeated events never add a
  second one, and a new spec (image...) yields a new name;
* a debugger's containers are those whose name is exactly its own name's form
  (:func:`owned_by`), never a prefix match: ``shell`` does not claim the containers of
  ``shell-admin``, nor ``a-b`` those of ``a.b``. Names of the previous scheme
  (``pdbg-<debugger name>-<spec hash>``) still count when they were the debugger's alone;
* at most ``maxPods`` pods hold the current container: those holding it first, then pods
  holding an older container of the debugger, then the oldest matching pods; the others are
  counted as skipped;
* a pod the API server refused the current container for (status.failedPods, same uid and
  container) is tried again only after a backoff (:func:`refusal_backoff`: 1 minute, doubling
  with each refusal in a row, at most 1,000 s, the work queue's longest), counted from the
  refusal's lastAttemptTime, so a refusal that a later change lifts (a namespace's Pod Security
  level relaxed) ends without a change to the debugger or the pod; a new pod uid or a new
  container is tried at once;
* the status reports each container as the kubelet does (status.ephemeralContainerStatuses),
  and Ready is True only when every container of the current spec is Running or Terminated
  with exit code 0: Starting while some are created or not reported yet, ContainerFailed
  (and Degraded) when one waits with an error reason or exited non-zero;
* status.debuggedPods lists at most :data:`MAX_DEBUGGED_PODS` containers (current spec
  first) and status.debuggedPodsTotal counts them all.

Executing a Plan is :mod:`poddebugger_operator.actions`' job; :func:`status_patch` turns the
outcome (after the injections, with their failures) into the status to write.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from opsuite_common.conditions import (
    AS_EXPECTED,
    DEGRADED,
    READY,
    parse_timestamp,
    set_condition,
    timestamp,
)
from opsuite_common.kube_model import ConditionStatus
from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from opsuite_common.store import JSON
from poddebugger_operator import images
from poddebugger_operator.models import (
    CONTAINER_PREFIX,
    MAX_FAILED_PODS,
    MAX_PODS_LIMIT,
    MAX_STATE_MESSAGE,
    MAX_STATE_REASON,
    NON_ROOT_USER,
    DebuggedPod,
    FailedPod,
    PodDebuggerSpec,
    PodDebuggerStatus,
    Profile,
)

DEBUGGED = "Debugged"
STARTING = "Starting"
CONTAINER_FAILED = "ContainerFailed"
NO_MATCHING_PODS = "NoMatchingPods"
INVALID_SPEC = "InvalidSpec"
INJECTION_FAILED = "InjectionFailed"
IMAGE_NOT_ALLOWED = "ImageNotAllowed"
POLICY_MISSING = "PolicyMissing"
PROFILE_NOT_ALLOWED = "ProfileNotAllowed"
PRIVILEGED_PROFILE = "sysadmin"
POLICY_FIX = (
    "nothing is injected until it is: install the chart with admissionPolicy.enabled=true (or "
    "apply its templates/admission-policy.yaml, see docs/poddebugger.md), or accept the risk "
    "that whoever may edit PodDebuggers runs images in the namespace's pods by starting the "
    "operator with --allow-without-admission-policy (chart value allowWithoutAdmissionPolicy)"
)
SYSADMIN_FIX = (
    "profile sysadmin (a privileged container) is not allowed by this operator: choose another "
    "profile, or start the operator with --allow-sysadmin-profile (chart value "
    "allowSysadminProfile)"
)
REJECTED = "Rejected"
HASH_LENGTH = 10
"""Hex digits of the container spec's hash, the end of every container name."""
NAME_HASH_LENGTH = 8
"""Hex digits of the debugger name's hash, just before the spec's."""
MAX_NAME = 63
LEGACY_STEM = MAX_NAME - len(CONTAINER_PREFIX) - 1 - HASH_LENGTH - 1
"""The previous scheme kept this much of the debugger's name (46 characters)."""
MAX_MESSAGE = 1024
TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
STARTING_REASONS = frozenset({"", "ContainerCreating", "PodInitializing"})
"""Waiting reasons of a container on its way up; any other Waiting reason is an error
(CreateContainerConfigError, ErrImagePull, ImagePullBackOff, InvalidImageName...)."""
MAX_DEBUGGED_PODS = 2 * MAX_PODS_LIMIT
"""status.debuggedPods' bound (containers of the current spec are listed first); the status
counts them all in debuggedPodsTotal."""
SHOWN = 3
"""Pods named in a condition message."""


class InvalidSpecError(ValueError):
    """The spec cannot be acted upon; the message is user-facing."""


def parse_spec(debugger: Mapping[str, Any]) -> PodDebuggerSpec:
    """Validate ``debugger["spec"]`` strictly, as the API server's schema does."""
    raw = debugger.get("spec")
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("spec: Field required")
    try:
        spec = PodDebuggerSpec.model_validate(raw, strict=True)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        path = ".".join(str(part) for part in ("spec", *first["loc"]))
        raise InvalidSpecError(f"{path}: {first['msg'].removeprefix('Value error, ')}") from None
    if not spec.selector.match_labels and not spec.selector.match_expressions:
        raise InvalidSpecError("spec.selector: must not be empty")
    return spec


def security_context(profile: Profile, run_as_user: int | None = None) -> JSON | None:
    """The securityContext kubectl debug --profile gives a debug container, with
    ``run_as_user`` (restricted: :data:`NON_ROOT_USER` when None, so that an image running
    as root passes runAsNonRoot; elsewhere only when given)."""
    context: JSON
    if profile == "restricted":
        context = {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_USER if run_as_user is None else run_as_user,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        return context
    if profile == "general":
        context = {"capabilities": {"add": ["SYS_PTRACE"]}}
    elif profile == "netadmin":
        context = {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}
    elif profile == "sysadmin":
        context = {"privileged": True}
    else:  # baseline
        context = {}
    if run_as_user is not None:
        context["runAsUser"] = run_as_user
    return context or None


def _container_body(spec: PodDebuggerSpec) -> JSON:
    body: JSON = {"image": spec.image}
    if spec.command:
        body["command"] = list(spec.command)
    if spec.args:
        body["args"] = list(spec.args)
    if spec.env:
        body["env"] = [{"name": e.name, "value": e.value} for e in spec.env]
    if spec.stdin:
        body["stdin"] = True
    if spec.tty:
        body["tty"] = True
    if spec.target_container:
        body["targetContainerName"] = spec.target_container
    context = security_context(spec.profile, spec.run_as_user)
    if context is not None:
        body["securityContext"] = context
    return body


def _hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def spec_hash(spec: PodDebuggerSpec) -> str:
    """:data:`HASH_LENGTH` hex digits of the container the spec describes."""
    canonical = json.dumps(_container_body(spec), sort_keys=True, separators=(",", ":"))
    return _hash(canonical, HASH_LENGTH)


def name_prefix(debugger_name: str) -> str:
    """``pdbg-<stem>-<hash of the debugger's name>``: every container name of one debugger is
    this followed by :data:`HASH_LENGTH` hex digits, nothing else.

    The stem is the name as a DNS label (dots as dashes), shortened to fit: readable, but
    ``a.b`` and ``a-b`` (or two long names alike in their first 39 characters) share it. The
    hash of the full name tells them apart.
    """
    room = MAX_NAME - len(CONTAINER_PREFIX) - 1 - NAME_HASH_LENGTH - HASH_LENGTH
    stem = re.sub(r"[^a-z0-9-]", "-", debugger_name.lower())[:room].strip("-") or "x"
    return f"{CONTAINER_PREFIX}{stem}-{_hash(debugger_name, NAME_HASH_LENGTH)}"


def container_name(debugger_name: str, spec: PodDebuggerSpec) -> str:
    """Deterministic ephemeral container name, a DNS label: ``pdbg-<stem>-`` then 18 hex
    digits, 8 of the debugger's name and 10 of the container spec (``pdbg-shell-``
    ``1a2b3c4d`` ``ee4f01367c``)."""
    return f"{name_prefix(debugger_name)}{spec_hash(spec)}"


def _legacy_prefix(debugger_name: str) -> str | None:
    """``pdbg-<debugger name>-``, the previous scheme's names of this debugger's containers
    (then followed by the spec hash), when that scheme kept the name as it is (no dot, at most
    46 characters): only then were those names the debugger's alone. (A name with dots had
    its dots made dashes, so ``a.b`` and ``a-b`` got the same names; a longer one was cut.)"""
    if "." in debugger_name or len(debugger_name) > LEGACY_STEM:
        return None
    return f"{CONTAINER_PREFIX}{debugger_name}-"


def legacy_container_name(debugger_name: str, spec: PodDebuggerSpec) -> str | None:
    """The name the previous scheme gave this spec's container (``pdbg-<name>-<spec hash>``),
    None when that name was not the debugger's alone (:func:`_legacy_prefix`)."""
    prefix = _legacy_prefix(debugger_name)
    return None if prefix is None else f"{prefix}{spec_hash(spec)}"


@lru_cache(maxsize=1024)
def owned_by(debugger_name: str) -> Callable[[str], bool]:
    """Whether a container name is one this debugger's containers have, of any spec.

    Exactly :func:`name_prefix` + 10 hex digits, or the previous scheme's
    ``pdbg-<debugger name>-`` + 10 hex digits (:func:`_legacy_prefix`). The two forms cannot
    be confused: a name of this scheme ends with 18 hex digits, one of the previous scheme
    with a dash and 10. Two debuggers' names of this scheme are the same only if their stems
    and 32-bit name hashes are.
    """
    forms = [re.escape(name_prefix(debugger_name))]
    legacy = _legacy_prefix(debugger_name)
    if legacy is not None:
        forms.append(re.escape(legacy))
    pattern = re.compile(f"(?:{'|'.join(forms)})[0-9a-f]{{{HASH_LENGTH}}}")
    return lambda container: pattern.fullmatch(container) is not None


def ephemeral_container(debugger_name: str, spec: PodDebuggerSpec) -> JSON:
    """The ephemeral container a pod gets from this debugger."""
    return {"name": container_name(debugger_name, spec), **_container_body(spec)}


_EMPTY: Mapping[str, Any] = {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    # A plain dict (what the API gives) is checked first: the ABC check is ten times slower.
    return meta if type(meta) is dict or isinstance(meta, Mapping) else _EMPTY


def pod_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The object's labels (empty when absent)."""
    labels = _meta(obj).get("labels")
    return labels if type(labels) is dict or isinstance(labels, Mapping) else _EMPTY


def injection_may_be_due(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a pod's change can call for an injection: it is new, or its labels changed.

    Anything else a pod's watch event brings (phase, container states, deletion, a container
    added) can only change the status, which is written at most once per second anyway.
    """
    return old is None or pod_labels(old) != pod_labels(new)


def ephemeral_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the pod's ephemeral containers."""
    containers = (pod.get("spec") or {}).get("ephemeralContainers") or ()
    return [str(c.get("name")) for c in containers if isinstance(c, Mapping)]


def is_live(pod: Mapping[str, Any]) -> bool:
    """Not terminated and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in TERMINATED_PHASES and not _meta(pod).get("deletionTimestamp")


def _text(value: Any, limit: int) -> str | None:
    """``value`` as a string of at most ``limit`` characters; None when empty."""
    return str(value)[:limit] or None if value else None


def _state(pod: Mapping[str, Any], name: str, image: str) -> DebuggedPod:
    """The container ``name`` of ``pod`` as the kubelet reports it (Unknown: not yet)."""
    fields: dict[str, Any] = {"pod": str(_meta(pod)["name"]), "container": name, "image": image}
    for status in (pod.get("status") or {}).get("ephemeralContainerStatuses") or ():
        if not (isinstance(status, Mapping) and status.get("name") == name):
            continue
        state = status.get("state")
        state = state if isinstance(state, Mapping) else _EMPTY
        if "running" in state:
            return DebuggedPod(**fields, state="Running")
        terminated = "terminated" in state  # else waiting; no member set means waiting too
        detail = state.get("terminated" if terminated else "waiting")
        detail = detail if isinstance(detail, Mapping) else _EMPTY
        code = detail.get("exitCode")
        return DebuggedPod(
            **fields,
            state="Terminated" if terminated else "Waiting",
            reason=_text(detail.get("reason"), MAX_STATE_REASON),
            message=_text(detail.get("message"), MAX_STATE_MESSAGE),
            exit_code=code if terminated and type(code) is int else None,
        )
    return DebuggedPod(**fields, state="Unknown")


def failed(entry: DebuggedPod) -> bool:
    """Whether the kubelet gave up on the container: Waiting with an error reason, or
    Terminated with a non-zero exit code."""
    if entry.state == "Waiting":
        return (entry.reason or "") not in STARTING_REASONS
    return entry.state == "Terminated" and entry.exit_code != 0


def up(entry: DebuggedPod) -> bool:
    """Whether the container runs, or ran and exited 0 (a one-shot command that succeeded)."""
    return entry.state == "Running" or (entry.state == "Terminated" and entry.exit_code == 0)


def _image(pod: Mapping[str, Any], name: str) -> str:
    for c in (pod.get("spec") or {}).get("ephemeralContainers") or ():
        if isinstance(c, Mapping) and c.get("name") == name:
            return str(c.get("image") or "")
    return ""


@dataclass(frozen=True)
class Injection:
    """Add ``container`` to the pod ``pod`` (a cached record) through the subresource;
    ``attempt`` counts the refusals in a row before it, plus one."""

    pod: Mapping[str, Any]
    container: JSON
    attempt: int = 1

    @property
    def pod_name(self) -> str:
        return str(_meta(self.pod)["name"])

    @property
    def pod_uid(self) -> str:
        return str(_meta(self.pod).get("uid") or "")


@dataclass(frozen=True)
class Failure:
    """The API server refused an injection, ``attempts`` times in a row, last at
    ``last_attempt`` (None: unknown, as in a status written before it was recorded)."""

    pod: str
    uid: str
    container: str
    message: str
    reason: str = REJECTED
    attempts: int = 1
    last_attempt: datetime | None = None


REFUSAL_RETRY_AFTER = 60.0
MAX_REFUSAL_RETRY_AFTER = 1000.0


def refusal_backoff(attempts: int) -> float:
    """Seconds between a refusal and the next attempt, after ``attempts`` refusals in a row."""
    doublings = min(max(attempts - 1, 0), 16)  # past 2^4 minutes the cap holds anyway
    return min(REFUSAL_RETRY_AFTER * 2.0**doublings, MAX_REFUSAL_RETRY_AFTER)


def retry_in(failure: Failure, now: datetime) -> float:
    """Seconds until ``failure``'s pod may be tried again (0: now)."""
    if failure.last_attempt is None:
        return 0.0
    due = failure.last_attempt.timestamp() + refusal_backoff(failure.attempts)
    return max(due - now.timestamp(), 0.0)


@dataclass(frozen=True)
class Outcome:
    """What the status reports."""

    blocked: tuple[str, str] | None = None
    """(reason, message) when nothing is to be done (InvalidSpec, PolicyMissing,
    ProfileNotAllowed, ImageNotAllowed)."""
    container: str = ""
    """The name the current container is given."""
    current: frozenset[str] = frozenset()
    """Names the current container may have on a pod: ``container``, and the previous
    scheme's name of the same container when it was the debugger's alone."""
    image: str = ""
    matched: tuple[str, ...] = ()
    """Names of matching live pods, sorted."""
    debugged: frozenset[str] = frozenset()
    """Pods holding (or just given) the current container."""
    skipped: int = 0
    failures: tuple[Failure, ...] = ()
    containers: tuple[DebuggedPod, ...] = ()
    """Every container of this debugger in matching pods (before this pass's injections)."""
    retrying: tuple[str, ...] = ()
    """Pods chosen for the current container whose injection waits out a backoff."""

    def with_results(self, injected: Iterable[Injection], failed: Iterable[Failure]) -> Outcome:
        """The outcome once injections were carried out (some maybe refused)."""
        failures = list(failed)
        refused = {f.pod for f in failures}
        added = [
            DebuggedPod(pod=i.pod_name, container=self.container, image=self.image, state="Unknown")
            for i in injected
            if i.pod_name not in refused
        ]
        return replace(
            self,
            debugged=self.debugged - refused,
            failures=(*(f for f in self.failures if f.pod not in refused), *failures),
            containers=(*self.containers, *added),
        )


@dataclass(frozen=True)
class Plan:
    """Actions for one reconcile of one PodDebugger; empty in steady state."""

    outcome: Outcome
    injections: tuple[Injection, ...] = ()
    status_patch: JSON | None = None
    """Status to write, as it will be once the injections are done; None when unchanged."""
    new_matches: tuple[str, ...] = field(default=())
    """Uids of pods planned for injection (for the latency metric)."""
    requeue_after: float | None = None
    """Seconds until the first refused pod may be tried again (None: none waits)."""


def _known_failures(debugger: Mapping[str, Any], current: Collection[str]) -> dict[str, Failure]:
    """Refusals recorded in the status for the current container (any of its ``current``
    names), by pod uid."""
    found: dict[str, Failure] = {}
    for entry in (debugger.get("status") or {}).get("failedPods") or ():
        if isinstance(entry, Mapping) and entry.get("container") in current:
            attempts = entry.get("attempts")
            failure = Failure(
                str(entry.get("pod")),
                str(entry.get("uid")),
                str(entry.get("container")),
                str(entry.get("message") or ""),
                str(entry.get("reason") or REJECTED),
                attempts if isinstance(attempts, int) and attempts > 0 else 1,
                parse_timestamp(entry.get("lastAttemptTime")),
            )
            found[failure.uid] = failure
    return found


def _order(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(pod)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name"))


def plan(
    debugger: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    now: datetime,
    *,
    allowed_prefixes: Sequence[str] = (),
    admission: str | None = None,
    requester: str | None = None,
    allow_sysadmin: bool = False,
    refused: Mapping[str, Failure] | None = None,
    waiting: Collection[str] = (),
) -> Plan:
    """Plan one reconcile of ``debugger`` over cached ``pods`` (any namespace).

    ``admission``: why the authorization admission policy is not known to guard the debugger
    (:func:`~poddebugger_operator.gate.admission_problem`): it injects nothing and is reported
    (PolicyMissing). ``requester``: why the operator may not act for the debugger's requester
    (:meth:`~opsuite_common.requester.RequesterReviews.problem`): it injects nothing and
    is reported (RequesterNotAllowed). Without ``allow_sysadmin`` (the operator's
    --allow-sysadmin-profile), a debugger with profile sysadmin injects nothing and is reported
    (ProfileNotAllowed).
    ``allowed_prefixes`` (the operator's --allowed-image-prefix): when given, a debugger whose
    image none of them admits (:func:`~poddebugger_operator.images.allowed`) injects nothing and
    is reported (ImageNotAllowed).
    ``refused``: refusals by pod uid not in the status yet (they count as those in it);
    ``waiting``: uids of pods whose last injection failed for a transient reason and that are
    not to be tried again yet (they keep their place under maxPods).
    """
    meta = _meta(debugger)
    namespace = meta.get("namespace")
    try:
        spec = parse_spec(debugger)
    except InvalidSpecError as error:
        outcome = Outcome(blocked=(INVALID_SPEC, str(error)))
        return Plan(outcome, status_patch=status_patch(debugger, outcome, now))
    blocked: tuple[str, str] | None = None
    if admission is not None:
        blocked = (POLICY_MISSING, f"{admission}; {POLICY_FIX}")
    elif requester is not None:
        blocked = (REQUESTER_NOT_ALLOWED, requester)
    elif spec.profile == PRIVILEGED_PROFILE and not allow_sysadmin:
        blocked = (PROFILE_NOT_ALLOWED, SYSADMIN_FIX)
    elif allowed_prefixes and not images.names_registry(spec.image):
        blocked = (
            IMAGE_NOT_ALLOWED,
            f"image {spec.image} names no registry: under an image allowlist the image must "
            f"be fully qualified ({images.normalise(spec.image)}), since CRI-O resolves a short "
            "name through its own search registries",
        )
    elif not images.allowed(spec.image, allowed_prefixes):
        blocked = (
            IMAGE_NOT_ALLOWED,
            f"image {spec.image} is not allowed: the operator only injects images under "
            + ", ".join(allowed_prefixes),
        )
    if blocked is not None:
        outcome = Outcome(blocked=blocked, image=spec.image)
        return Plan(outcome, status_patch=status_patch(debugger, outcome, now))
    name = container_name(str(meta["name"]), spec)
    legacy = legacy_container_name(str(meta["name"]), spec)
    current = frozenset([name] if legacy is None else [name, legacy])
    owns = owned_by(str(meta["name"]))
    matching = sorted(
        (
            p
            for p in pods
            if _meta(p).get("namespace") == namespace
            and is_live(p)
            and spec.selector.matches(pod_labels(p))
        ),
        key=_order,
    )
    holders = [p for p in matching if not current.isdisjoint(ephemeral_names(p))]
    known = _known_failures(debugger, current)
    known.update((uid, f) for uid, f in (refused or {}).items() if f.container in current)
    room = max(spec.max_pods - len(holders), 0)
    candidates = [p for p in matching if current.isdisjoint(ephemeral_names(p))]
    # Pods that hold an older container of this debugger come first: they were chosen before.
    candidates.sort(key=lambda p: not any(owns(n) for n in ephemeral_names(p)))
    chosen = candidates[:room]
    skipped = len(candidates) - len(chosen)
    container = ephemeral_container(str(meta["name"]), spec)
    injections: list[Injection] = []
    failures: list[Failure] = []
    retrying: list[str] = []
    requeue: list[float] = []
    for pod in chosen:
        uid = str(_meta(pod).get("uid") or "")
        refusal = known.get(uid)
        wait = 0.0 if refusal is None else retry_in(refusal, now)
        if refusal is not None and wait > 0:
            failures.append(refusal)
            requeue.append(wait)
        elif uid in waiting:
            retrying.append(str(_meta(pod)["name"]))
        else:
            attempt = 1 if refusal is None else refusal.attempts + 1
            injections.append(Injection(pod, container, attempt))
    containers = tuple(
        _state(p, n, _image(p, n)) for p in matching for n in ephemeral_names(p) if owns(n)
    )
    outcome = Outcome(
        container=name,
        current=current,
        image=spec.image,
        matched=tuple(str(_meta(p)["name"]) for p in matching),
        debugged=frozenset(
            [*(str(_meta(p)["name"]) for p in holders), *(i.pod_name for i in injections)]
        ),
        skipped=skipped,
        failures=tuple(failures),
        containers=containers,
        retrying=tuple(sorted(retrying)),
    )
    after = outcome.with_results(injections, ())
    return Plan(
        outcome,
        injections=tuple(injections),
        status_patch=status_patch(debugger, after, now),
        new_matches=tuple(i.pod_uid for i in injections),
        requeue_after=min(requeue, default=None),
    )


_Condition = tuple[str, ConditionStatus, str, str]


def _describe(entry: DebuggedPod) -> str:
    """``pod/container: reason: message`` of a container that failed."""
    if entry.state == "Terminated":
        code = "?" if entry.exit_code is None else entry.exit_code
        what = f"Terminated with exit code {code}" + (f" ({entry.reason})" if entry.reason else "")
    else:
        what = entry.reason or entry.state
    return f"{entry.pod}/{entry.container}: {what}" + (
        f": {entry.message}" if entry.message else ""
    )


def _listed(items: Sequence[str], more: int) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {more - SHOWN} more" if more > SHOWN else "")


def _conditions(outcome: Outcome) -> list[_Condition]:
    if outcome.blocked is not None:
        reason, message = outcome.blocked
        return [(READY, "False", reason, message), (DEGRADED, "True", reason, message)]
    over = f"; {outcome.skipped} more matching pods over maxPods" if outcome.skipped else ""
    current = sorted(
        (c for c in outcome.containers if c.container in outcome.current),
        key=lambda c: c.pod,
    )
    broken = [c for c in current if failed(c)]
    if outcome.failures or broken:
        parts = []
        if outcome.failures:
            shown = [f"{f.pod}: {f.message}" for f in outcome.failures]
            parts.append(
                f"{len(shown)} pods refused the debug container: {_listed(shown, len(shown))}"
            )
        if broken:
            shown = [_describe(c) for c in broken]
            parts.append(f"{len(shown)} debug containers failed: {_listed(shown, len(shown))}")
        room = MAX_MESSAGE // len(parts) - 2  # each part keeps its share of the message
        message = ". ".join(p[:room] for p in parts)
        reason = INJECTION_FAILED if outcome.failures else CONTAINER_FAILED
        return [(READY, "False", reason, message), (DEGRADED, "True", reason, message)]
    healthy: _Condition = (DEGRADED, "False", AS_EXPECTED, "")
    if not outcome.matched:
        return [(READY, "True", NO_MATCHING_PODS, "no pod matches the selector"), healthy]
    pending = [c for c in current if not up(c)]
    if pending or outcome.retrying:
        parts = []
        if pending:
            shown = [f"{c.pod} ({c.reason or c.state})" for c in pending]
            shown = [s.replace("(Unknown)", "(not reported yet)") for s in shown]
            parts.append(
                f"{len(current) - len(pending)} of {len(current)} debug containers running; "
                f"starting: {_listed(shown, len(shown))}"
            )
        if outcome.retrying:
            retrying = list(outcome.retrying)
            parts.append(f"injection to be retried: {_listed(retrying, len(retrying))}")
        return [(READY, "False", STARTING, ("; ".join(parts) + over)[:MAX_MESSAGE]), healthy]
    count = f"{len(outcome.debugged)} of {len(outcome.matched)} matching pods debugged{over}"
    return [(READY, "True", DEBUGGED, count), healthy]


def _bounded(containers: Iterable[DebuggedPod], current: Collection[str]) -> list[DebuggedPod]:
    """The first :data:`MAX_DEBUGGED_PODS` entries: those of the ``current`` container first,
    then by pod and container (the order of the list)."""
    ordered = sorted(containers, key=lambda d: (d.container not in current, d.pod, d.container))
    return sorted(ordered[:MAX_DEBUGGED_PODS], key=lambda d: (d.pod, d.container))


def status_patch(debugger: Mapping[str, Any], outcome: Outcome, now: datetime) -> JSON | None:
    """The status fields to write, or None when the current status already says the same."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    current = debugger.get("status") or {}
    generation = int(_meta(debugger).get("generation") or 0)
    previous = current.get("conditions")
    conditions: list[dict[str, Any]] = (
        [dict(c) for c in previous if isinstance(c, Mapping)] if isinstance(previous, list) else []
    )
    for type_, value, reason, message in _conditions(outcome):
        conditions, _ = set_condition(conditions, type_, value, reason, message, generation, now)
    failures: Sequence[Failure] = sorted(outcome.failures, key=lambda f: f.pod)
    desired = PodDebuggerStatus(
        matched_pods=len(outcome.matched),
        debugged_count=len(outcome.debugged),
        skipped_pods=outcome.skipped,
        debugged_pods=_bounded(outcome.containers, outcome.current),
        debugged_pods_total=len(outcome.containers),
        failed_pods=[
            FailedPod(
                pod=f.pod,
                uid=f.uid,
                container=f.container,
                reason=f.reason,
                message=f.message[:MAX_MESSAGE],
                attempts=f.attempts,
                last_attempt_time=None if f.last_attempt is None else timestamp(f.last_attempt),
            )
            for f in failures[:MAX_FAILED_PODS]
        ],
        observed_generation=generation,
        conditions=conditions,
    ).to_kube()
    if all(current.get(k) == v for k, v in desired.items()):
        return None
    return desired
