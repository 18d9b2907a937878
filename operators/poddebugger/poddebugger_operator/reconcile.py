"""Pure PodDebugger planning: the PodDebugger + cached pods -> ephemeral containers to add.

Rules:

* only pods of the PodDebugger's own namespace whose labels match its selector are considered;
  pods that are terminated (Succeeded, Failed) or being deleted are skipped;
* a pod is written only by adding one ephemeral container (pods/ephemeralcontainers); nothing
  else of a pod is ever changed, and nothing is ever removed; in mode Copy a selected pod is
  not written at all: it gets one copy holding the container (:mod:`.copies`), never
  rewritten, and copies are never themselves selected;
* the container's name says which debugger and which spec it is of (:mod:`.names`), so a pod
  that has it is not given it again, and a new spec yields a new container;
* at most ``maxPods`` pods hold the current container: those holding it first, then pods
  holding an older container of the debugger, then the oldest matching pods; the others are
  counted as skipped;
* a pod the API server refused the current container for (status.failedPods, same uid and
  container) is tried again only after a backoff (:mod:`.refusals`).

The spec is read in :mod:`.spec`, pods in :mod:`.pods`; the status is written from the outcome
by :mod:`.status`. Executing a Plan is :mod:`poddebugger_operator.actions`' job.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from opsuite_common.store import JSON
from poddebugger_operator import images
from poddebugger_operator.attribution import attribution
from poddebugger_operator.copies import COPY_NAME_TAKEN, copy_meta, copy_name, copy_of, is_copy
from poddebugger_operator.deadline import exceeded, remaining
from poddebugger_operator.models import MAX_FAILED_PODS, DebuggedPod, PodDebuggerSpec
from poddebugger_operator.mounts import VOLUME_NOT_ALLOWED, VOLUME_NOT_FOUND, mount_problem
from poddebugger_operator.names import (
    container_name,
    ephemeral_container,
    legacy_container_name,
    owned_by,
)
from poddebugger_operator.outcome import Injection, Outcome
from poddebugger_operator.pods import (
    container_image,
    container_names,
    container_state,
    ephemeral_names,
    is_live,
    object_meta,
    pod_labels,
    regular_names,
)
from poddebugger_operator.refusals import TARGET_NOT_FOUND, Failure, known_failures, retry_in
from poddebugger_operator.spec import InvalidSpecError, parse_spec
from poddebugger_operator.status import status_patch

INVALID_SPEC = "InvalidSpec"
IMAGE_NOT_ALLOWED = "ImageNotAllowed"
POLICY_MISSING = "PolicyMissing"
PROFILE_NOT_ALLOWED = "ProfileNotAllowed"
PRIVILEGED_PROFILE = "sysadmin"
UNFIT_REASONS = frozenset({TARGET_NOT_FOUND, VOLUME_NOT_FOUND, VOLUME_NOT_ALLOWED, COPY_NAME_TAKEN})
"""Failures of a pod that can never take the container (:func:`unfit`), not of the API server."""
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


@dataclass(frozen=True)
class Plan:
    """Actions for one reconcile of one PodDebugger; empty in steady state."""

    outcome: Outcome
    injections: tuple[Injection, ...] = ()
    status_patch: JSON | None = None
    """Status to write, as it will be once the injections are done; None when unchanged."""
    new_matches: tuple[str, ...] = field(default=())
    """Uids of pods planned for injection (for the latency metric)."""
    by: str = ""
    """The debugger and its requester, as its Events name them (:mod:`.attribution`)."""
    unfit: tuple[Failure, ...] = ()
    """Pods newly found unable to take the container (:func:`unfit`; listed in the status
    from now on): an Event each, on the pod and on the debugger."""
    requeue_after: float | None = None
    """Seconds until the next pass that no event starts: the first refused pod may be tried
    again, or the active deadline passes (None: none)."""


def _order(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = object_meta(pod)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name"))


def unfit(pod: Mapping[str, Any], spec: PodDebuggerSpec) -> tuple[str, str] | None:
    """(reason, message) when ``pod`` can never take the spec's container: it lacks the
    target container, or a volume to mount, or that volume holds credentials (:mod:`.mounts`).
    Such a pod is reported and takes no maxPods slot; nothing is sent for it."""
    target = spec.target_container
    if target is not None and target not in container_names(pod):
        return TARGET_NOT_FOUND, f"the pod has no container {target} (spec.targetContainer)"
    return mount_problem(pod, spec.volume_mounts)


def _blocked(
    spec: PodDebuggerSpec,
    allowed_prefixes: Sequence[str],
    admission: str | None,
    requester: str | None,
    allow_sysadmin: bool,
) -> tuple[str, str] | None:
    """(reason, message) when nothing may be injected for the debugger (see :func:`plan`)."""
    if admission is not None:
        return (POLICY_MISSING, f"{admission}; {POLICY_FIX}")
    if requester is not None:
        return (REQUESTER_NOT_ALLOWED, requester)
    if spec.profile == PRIVILEGED_PROFILE and not allow_sysadmin:
        return (PROFILE_NOT_ALLOWED, SYSADMIN_FIX)
    if allowed_prefixes and not images.names_registry(spec.image):
        return (
            IMAGE_NOT_ALLOWED,
            f"image {spec.image} names no registry: under an image allowlist the image must "
            f"be fully qualified ({images.normalise(spec.image)}), since CRI-O resolves a short "
            "name through its own search registries",
        )
    if not images.allowed(spec.image, allowed_prefixes):
        return (
            IMAGE_NOT_ALLOWED,
            f"image {spec.image} is not allowed: the operator only injects images under "
            + ", ".join(allowed_prefixes),
        )
    return None


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
    ``now``: the clock; past the debugger's active deadline (:mod:`.deadline`) nothing is
    injected (DeadlineExceeded), and before it the plan asks to run again at the deadline.
    """
    meta = object_meta(debugger)
    namespace = meta.get("namespace")
    try:
        spec = parse_spec(debugger)
    except InvalidSpecError as error:
        outcome = Outcome(blocked=(INVALID_SPEC, str(error)))
        return Plan(outcome, status_patch=status_patch(debugger, outcome, now))
    left = remaining(debugger, spec, now)
    # Past the deadline nothing is added, whatever else holds: that is final.
    expired = None if left is None or left > 0 else exceeded(debugger, spec)
    blocked = (
        None
        if expired is not None
        else _blocked(spec, allowed_prefixes, admission, requester, allow_sysadmin)
    )
    if blocked is not None:
        outcome = Outcome(blocked=blocked, image=spec.image)
        return Plan(outcome, status_patch=status_patch(debugger, outcome, now))
    debugger_name = str(meta["name"])
    name = container_name(debugger_name, spec)
    legacy = legacy_container_name(debugger_name, spec)
    current = frozenset([name] if legacy is None else [name, legacy])
    owns = owned_by(debugger_name)
    local = [p for p in pods if object_meta(p).get("namespace") == namespace]
    # A copy (mode Copy) is never itself copied or debugged.
    matching = sorted(
        (
            p
            for p in local
            if is_live(p) and not is_copy(p) and spec.selector.matches(pod_labels(p))
        ),
        key=_order,
    )
    copying = spec.mode == "Copy"
    copies = {str(object_meta(p)["name"]): p for p in local if copying and copy_of(debugger, p)}

    def copy_for(pod: Mapping[str, Any]) -> str | None:
        return copy_name(debugger_name, str(object_meta(pod)["name"])) if copying else None

    def has_it(pod: Mapping[str, Any]) -> bool:
        """Whether the pod holds (mode Copy: has a copy holding) the current container, or
        (mode Copy) any container of the debugger's: a copy is never rewritten."""
        copy = copy_for(pod)
        if copy is not None:
            return copy in copies
        return not current.isdisjoint(ephemeral_names(pod))

    def debug_containers(pod: Mapping[str, Any]) -> list[DebuggedPod]:
        copy = copies.get(copy_for(pod) or "")
        if copy is not None:
            original = str(object_meta(pod)["name"])
            return [
                container_state(copy, n, container_image(copy, n, "containers"), original)
                for n in regular_names(copy)
                if owns(n)
            ]
        if copying:
            return []
        return [
            container_state(pod, n, container_image(pod, n))
            for n in ephemeral_names(pod)
            if owns(n)
        ]

    holders = [p for p in matching if has_it(p)]
    known = known_failures(debugger, current)
    known.update((uid, f) for uid, f in (refused or {}).items() if f.container in current)
    room = max(spec.max_pods - len(holders), 0)
    candidates = [p for p in matching if not has_it(p)]
    # Names of pods that are not this debugger's copies (mode Copy: a copy cannot take one).
    taken = {str(object_meta(p)["name"]) for p in local} - copies.keys() if copying else set()

    def problem(pod: Mapping[str, Any]) -> tuple[str, str] | None:
        copy = copy_for(pod)
        if copy in taken:
            return (
                COPY_NAME_TAKEN,
                f"pod {copy} exists and is not this PodDebugger's copy of this pod; the copy is "
                "made once that name is free",
            )
        return unfit(pod, spec)

    # A pod that can never hold this container is reported and takes no slot.
    judged = [(p, problem(p)) for p in candidates]
    unfit_pods = [(p, problem) for p, problem in judged if problem is not None]
    candidates = [p for p, problem in judged if problem is None]
    # Pods that hold an older container of this debugger come first: they were chosen before.
    candidates.sort(key=lambda p: not any(owns(n) for n in ephemeral_names(p)))
    chosen = candidates[:room]
    skipped = len(candidates) - len(chosen)
    container = ephemeral_container(str(meta["name"]), spec)
    by = attribution(debugger)
    injections: list[Injection] = []
    failures: list[Failure] = []
    retrying: list[str] = []
    requeue: list[float] = []
    for pod in chosen:
        uid = str(object_meta(pod).get("uid") or "")
        refusal = known.get(uid)
        wait = 0.0 if refusal is None else retry_in(refusal, now)
        if expired is not None:
            if refusal is not None:  # still reported, never tried again
                failures.append(refusal)
        elif refusal is not None and wait > 0:
            failures.append(refusal)
            requeue.append(wait)
        elif uid in waiting:
            retrying.append(str(object_meta(pod)["name"]))
        else:
            attempt = 1 if refusal is None else refusal.attempts + 1
            copy = copy_meta(debugger, pod) if copying else None
            injections.append(Injection(pod, container, attempt, by, copy))
    missing = [
        Failure(
            str(object_meta(p)["name"]), str(object_meta(p).get("uid") or ""), name, why, reason
        )
        for p, (reason, why) in unfit_pods
    ]
    failures.extend(missing)
    containers = tuple(c for p in matching for c in debug_containers(p))
    outcome = Outcome(
        container=name,
        current=current,
        image=spec.image,
        matched=tuple(str(object_meta(p)["name"]) for p in matching),
        debugged=frozenset(
            [*(str(object_meta(p)["name"]) for p in holders), *(i.pod_name for i in injections)]
        ),
        skipped=skipped,
        failures=tuple(failures),
        containers=containers,
        retrying=tuple(sorted(retrying)),
        expired=expired,
    )
    if left:  # run again at the deadline, without waiting for an event
        requeue.append(left)
    after = outcome.with_results(injections, ())
    # Posted once: when the status (its first MAX_FAILED_PODS failures) lists them anew.
    listed = sorted(failures, key=lambda f: f.pod)[:MAX_FAILED_PODS]
    announce = tuple(
        f
        for f in listed
        if f.reason in UNFIT_REASONS and (f.uid not in known or known[f.uid].reason != f.reason)
    )
    return Plan(
        outcome,
        by=by,
        unfit=announce,
        injections=tuple(injections),
        status_patch=status_patch(debugger, after, now),
        new_matches=tuple(i.pod_uid for i in injections),
        requeue_after=min(requeue, default=None),
    )
