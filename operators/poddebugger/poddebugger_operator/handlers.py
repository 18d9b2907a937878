"""PodDebugger wiring: two watches feed caches and enqueue PodDebuggers; one controller.

* poddebuggers: the full objects, indexed by namespace;
* pods: slim records (:func:`~poddebugger_operator.actions.slim_pod`), indexed by namespace;
* validatingadmissionpolicies and validatingadmissionpolicybindings (read-only): whether the
  authorization policy guards each PodDebugger (:mod:`~poddebugger_operator.gate`). A change
  to the policy or to a binding of it enqueues every PodDebugger, so injection starts (or
  stops) without a restart;
* each pass first asks whether the PodDebugger's requester may still run `kubectl debug` in
  its namespace (:mod:`~poddebugger_operator.requester`, cached SubjectAccessReviews).

A pod that appears, vanishes, or changes labels, phase or ephemeral containers enqueues the
PodDebuggers of its namespace whose selector matches it (as it is or as it was): at once when
it is new or its labels changed (an injection may be due), else after a second (only the
status can change, and status writes are paced to one a second). Nothing is polled.
Both caches are :class:`~opsuite_common.store.Store` objects given to ``manager.watch`` (pods
with ``slim_pod`` as ``transform``), so the manager prunes them after every
(re)listing: a pod deleted while the watch was down (no DELETED event, a relist after "410
Gone") is handed to the handler as a DELETED event, as client-go's reflector does, and stops
counting in ``matchedPods`` and taking a ``maxPods`` slot.
Event handlers run as events arrive, also during the first listings (kopf hands the manager's
watches their events directly, holding none back); passes start only once every watch has
listed and its listing is in the cache (the manager's cache-sync gate, as controller-runtime's
WaitForCacheSync), so a pass never mistakes a cache still filling for a pod without its debug
container.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from opsuite_common.controller import Result
from opsuite_common.manager import Manager
from opsuite_common.requester import RequesterReviews
from opsuite_common.spec_cache import SpecCache
from opsuite_common.status_pacer import STATUS_INTERVAL, StatusPacer
from opsuite_common.store import JSON, ObjectKey, Store, by_namespace, object_key, status_only
from poddebugger_operator import metrics
from poddebugger_operator.actions import (
    WATCHED_FIELDS,
    InjectionResult,
    Injector,
    slim_pod,
    write_status,
)
from poddebugger_operator.attribution import added, copied, not_added
from poddebugger_operator.copies import COPY_LABEL
from poddebugger_operator.deadline import remaining
from poddebugger_operator.gate import admission_problem
from poddebugger_operator.injected import Injected
from poddebugger_operator.models import GROUP, PLURAL, VERSION
from poddebugger_operator.pods import injection_may_be_due, pod_labels
from poddebugger_operator.policy import POLICY_NAME, admission_policy
from poddebugger_operator.reconcile import plan
from poddebugger_operator.requester import needs
from poddebugger_operator.spec import InvalidSpecError, parse_spec

CONTROLLER = "poddebugger"
MAX_PENDING = 10_000
ADMISSION_GROUP, ADMISSION_VERSION = "admissionregistration.k8s.io", "v1"
POLICIES, BINDINGS = "validatingadmissionpolicies", "validatingadmissionpolicybindings"


@dataclass(frozen=True)
class Settings:
    """The operator's own flags (see ``__main__``)."""

    allowed_prefixes: tuple[str, ...] = ()
    """Only images one of them admits are injected (none: any)."""
    allow_without_admission_policy: bool = False
    """Inject without the authorization admission policy (the opt-out)."""
    allow_sysadmin_profile: bool = False
    """Inject containers of profile sysadmin (privileged)."""
    admission_policy_name: str = POLICY_NAME
    """The authorization policy's name."""
    require_requester: bool = False
    """Act only for PodDebuggers whose requester the requester policy recorded."""


def _namespace_index(obj: JSON) -> list[Hashable]:
    return list(by_namespace(obj))


def _pod_ref(pod: JSON) -> JSON:
    """A pod as an Event's involvedObject needs it (slim records have no kind)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod["metadata"]}


def setup(manager: Manager, settings: Settings | None = None) -> None:
    """Register the watches and the PodDebugger controller on ``manager`` (default
    :class:`Settings` when None)."""
    settings = settings or Settings()
    expected = admission_policy()[0]
    expected["metadata"]["name"] = settings.admission_policy_name
    debuggers = Store("poddebuggers", {"namespace": _namespace_index})
    policies = Store(POLICIES)
    bindings = Store(BINDINGS)
    injected = Injected()
    # Not filled by the transform: Injector fills the records it applies, and a second fill
    # would see the container it just put back as confirmed by the watch and drop it.
    pods = Store("pods", {"namespace": _namespace_index}, transform=slim_pod)
    pacer = StatusPacer()
    specs = SpecCache(parse_spec, InvalidSpecError)
    recorder = manager.event_recorder()
    reviews = RequesterReviews(manager.kube)
    seen: dict[tuple[ObjectKey, str], float] = {}
    """(PodDebugger, pod uid) planned for injection: when first planned (monotonic seconds)."""
    announced: set[tuple[ObjectKey, str, str]] = set()
    """(PodDebugger, pod uid, container) whose missing target container an Event reported."""

    async def reconcile(key: ObjectKey) -> Result | None:
        debugger = debuggers.get(*key)
        if debugger is None:
            pacer.forget(key)
            injector.forget_debugger(key)
            for entry in [k for k in seen if k[0] == key]:
                seen.pop(entry, None)
            announced.difference_update([a for a in announced if a[0] == key])
            return None
        admission = None
        if not settings.allow_without_admission_policy:
            policy = policies.get("", settings.admission_policy_name)
            named = {} if policy is None else {settings.admission_policy_name: policy}
            admission = admission_problem(debugger, named, bindings.items(), expected)
        now = datetime.now(UTC)
        spec = specs.get(debugger)
        requester = None
        # Past its deadline a debugger acts for nobody: no review is asked.
        if admission is None and not (spec is not None and remaining(debugger, spec, now) == 0):
            requester = await reviews.problem(
                debugger, GROUP, needs(debugger), required=settings.require_requester
            )
        actions = plan(
            debugger,
            pods.by_index("namespace", key[0]),
            now,
            allowed_prefixes=settings.allowed_prefixes,
            admission=admission,
            requester=requester,
            allow_sysadmin=settings.allow_sysadmin_profile,
            refused=injector.refused(key),
            waiting=injector.waiting(key),
        )
        if len(seen) > MAX_PENDING:
            seen.clear()
        started = time.monotonic()
        for uid in actions.new_matches:
            seen.setdefault((key, uid), started)
        injector.send(key, actions.injections)
        for failure in actions.unfit:
            # Until the status lists it (status writes are paced), a pass announces it again.
            if len(announced) > MAX_PENDING:
                announced.clear()
            if (key, failure.uid, failure.container) in announced:
                continue
            announced.add((key, failure.uid, failure.container))
            why = not_added(actions.by, failure.container, failure.pod, failure.message)
            pod = {"metadata": {"namespace": key[0], "name": failure.pod, "uid": failure.uid}}
            recorder.warning(_pod_ref(pod), failure.reason, why)
            recorder.warning(debugger, "InjectionFailed", why)
        delay = await write_status(
            manager.kube, pacer, key, actions.status_patch, on_status=debuggers.record_write
        )
        retry = [d for d in (delay, actions.requeue_after) if d is not None]
        return Result(requeue_after=min(retry)) if retry else None

    controller = manager.add_controller(CONTROLLER, reconcile)

    def on_result(key: ObjectKey, result: InjectionResult) -> None:
        """Metrics, Events and the next pass for one completed injection."""
        injection = result.injection
        if result.retry_after is not None:  # the pod stays seen: its latency runs on
            metrics.observe_failures(1)
            controller.enqueue(key, after=result.retry_after)
            return
        started = seen.pop((key, injection.pod_uid), None)
        debugger = debuggers.get(*key)
        container = injection.container
        pod = _pod_ref(dict(injection.pod))
        if result.failure is None:
            metrics.observe_injection(time.monotonic() - (started or time.monotonic()))
            if injection.copy is not None:
                message = copied(injection.by, container, injection.pod_name, injection.copy)
                recorder.normal(pod, "DebugCopyCreated", message)
                if debugger is not None:
                    recorder.normal(debugger, "DebugCopyCreated", message)
                return
            message = added(injection.by, container, injection.pod_name)
            recorder.normal(pod, "DebugContainerAdded", message)
            if debugger is not None:
                recorder.normal(debugger, "DebugContainerAdded", message)
            return
        failure = result.failure
        metrics.observe_failures(1)
        message = not_added(injection.by, failure.container, failure.pod, failure.message)
        recorder.warning(pod, "DebugContainerRefused", message)
        if debugger is not None:
            recorder.warning(debugger, "InjectionFailed", message)
        controller.enqueue(key)  # the status reports it

    injector = Injector(manager.kube, pods, injected, on_result)

    def enqueue_selecting(pods_: Sequence[JSON], after: float, *, named: bool = False) -> None:
        """Enqueue the PodDebuggers whose selector matches one of ``pods_`` (one pod, as it
        is and as it was), or that made it (a copy: it has none of the original's labels);
        with ``named`` (a pod appeared or vanished: a copy's name taken or freed) also every
        PodDebugger of mode Copy there."""
        namespace = pods_[0]["metadata"].get("namespace", "")
        makers = {pod_labels(p).get(COPY_LABEL) for p in pods_} - {None}
        for debugger in debuggers.by_index("namespace", namespace):
            if debugger["metadata"].get("uid") in makers:
                controller.enqueue(object_key(debugger), after=after)
                continue
            spec = specs.get(debugger)
            if named and spec is not None and spec.mode == "Copy":
                controller.enqueue(object_key(debugger), after=after)
                continue
            if spec is not None and any(spec.selector.matches(pod_labels(p)) for p in pods_):
                controller.enqueue(object_key(debugger), after=after)

    def on_debugger(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        if event_type == "DELETED":
            specs.forget(obj["metadata"].get("uid", ""))
        elif event_type == "MODIFIED" and status_only(old, obj):
            return  # our own status write: the cache now holds it, nothing to plan
        controller.enqueue(object_key(obj))

    def on_pod(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        """``obj``: the event's pod, or the cached record of one a relisting no longer holds."""
        if event_type == "DELETED":
            record = slim_pod(obj)  # idempotent on a record
            injector.forget_pod(record["metadata"].get("uid", ""))
        else:
            stored = pods.get(*object_key(obj)) or slim_pod(obj)
            record = injected.fill(stored)  # the containers added that the watch lags behind
            if record is not stored:
                pods.apply(event_type, record)
        if event_type != "DELETED" and old == record:
            return  # nothing the planner reads changed
        urgent = event_type != "DELETED" and injection_may_be_due(old, record)
        enqueue_selecting(
            [record] if old is None else [record, old],
            0.0 if urgent else STATUS_INTERVAL,
            named=old is None or event_type == "DELETED",
        )

    def enqueue_all() -> None:
        for debugger in debuggers.items():
            controller.enqueue(object_key(debugger))

    def on_policy(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        if obj["metadata"].get("name") == settings.admission_policy_name:
            enqueue_all()  # every PodDebugger's verdict may have changed

    def on_binding(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        names = {(o.get("spec") or {}).get("policyName") for o in (obj, old or {})}
        if settings.admission_policy_name in names:
            enqueue_all()

    manager.watch(GROUP, VERSION, PLURAL, store=debuggers, on_event=on_debugger)
    manager.watch("", "v1", "pods", store=pods, on_event=on_pod, fields=WATCHED_FIELDS)
    if not settings.allow_without_admission_policy:
        for plural, store, handler in (
            (POLICIES, policies, on_policy),
            (BINDINGS, bindings, on_binding),
        ):
            manager.watch(ADMISSION_GROUP, ADMISSION_VERSION, plural, store=store, on_event=handler)
