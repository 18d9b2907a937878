"""Property tests: ownership safety, convergence, rollout bounds, ranking order, idempotence."""

from __future__ import annotations

import copy
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsuite_packaging.crd import structural_schema
from opsuite_testkit import (
    DNS_SUBDOMAIN,
    LABELS,
    from_schema,
    is_dns_subdomain,
    label_errors,
    schema_errors,
)
from opsuite_testkit.podset import HASH, OLD, T0, TEMPLATE, UID, iso
from opsuite_testkit.podset import pod as make_pod
from podset_operator.models import NAME_LABEL, PodSetSpec, PodSetStatus
from podset_operator.pod_ranking import log_bucket, rank_for_deletion
from podset_operator.pod_state import (
    Pod,
    creation_time,
    deletion_cost,
    is_active,
    is_available,
    is_ready,
    is_updated,
    max_restarts,
    max_sidecar_restarts,
    metadata,
    node_name,
    phase,
    pod_labels,
    pod_name,
    ready_since,
    slim_pod,
)
from podset_operator.reconcile import Plan, plan
from podset_operator.rollout import resolve_fenceposts
from podset_operator.template import owner_reference, template_hash

WEB_AND_NAME = {"app": "web", NAME_LABEL: "web"}
NODES = ("", "n0", "n1", "n2")
FENCEPOSTS: st.SearchStrategy[int | str] = st.sampled_from(
    [0, 1, 2, 3, "0%", "10%", "25%", "50%", "100%"]
)
SIM = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=80, deadline=None)


def make_podset(
    replicas: int,
    strategy: str = "RollingUpdate",
    surge: int | str = "25%",
    unavailable: int | str = "25%",
    min_ready: int = 0,
    selector: bool = True,
) -> dict[str, Any]:
    update_strategy: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        update_strategy["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "minReadySeconds": min_ready,
        "template": TEMPLATE,
        "updateStrategy": update_strategy,
    }
    if selector:
        spec["selector"] = {"matchLabels": {"app": "web"}}
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": spec,
    }


@st.composite
def any_pod(draw: st.DrawFn, name: str, active_only: bool = False) -> dict[str, Any]:
    ready_age = draw(st.none() | st.integers(0, 120))
    created_age = draw(st.none() | st.integers(0, 600))
    phases = ["Running", "Pending", "Unknown", ""]
    return make_pod(
        name,
        owner=draw(st.sampled_from([UID, UID, None, "someone-else"])),
        labels=draw(
            st.sampled_from([{"app": "web"}, WEB_AND_NAME, WEB_AND_NAME, {"app": "db"}, {}])
        ),
        hash_=draw(st.sampled_from([HASH, OLD, None])),
        phase=draw(st.sampled_from(phases if active_only else [*phases, "Succeeded", "Failed"])),
        ready=draw(st.booleans()),
        ready_at=None if ready_age is None else T0 - timedelta(seconds=ready_age),
        node=draw(st.sampled_from(NODES)),
        restarts=draw(st.integers(0, 2)),
        sidecar_restarts=draw(st.none() | st.integers(0, 2)),
        cost=draw(st.none() | st.sampled_from(["-1", "0", "3", "bogus"])),
        created=None if created_age is None else T0 - timedelta(seconds=created_age),
        deleting=not active_only and draw(st.integers(0, 5)) == 0,
    )


@st.composite
def pod_lists(
    draw: st.DrawFn, max_size: int = 10, active_only: bool = False
) -> list[dict[str, Any]]:
    size = draw(st.integers(0, max_size))
    return [draw(any_pod(f"p{i}", active_only)) for i in range(size)]


@st.composite
def podsets(draw: st.DrawFn, max_replicas: int = 6) -> dict[str, Any]:
    return make_podset(
        draw(st.integers(0, max_replicas)),
        draw(st.sampled_from(["RollingUpdate", "RollingUpdate", "OnDelete"])),
        draw(FENCEPOSTS),
        draw(FENCEPOSTS),
        draw(st.sampled_from([0, 0, 10])),
        draw(st.booleans()),
    )


def selected(ps: dict[str, Any], pod: Pod) -> bool:
    """The pod matches the PodSet's selector, or its name label when it has none."""
    key = "app" if "selector" in ps["spec"] else NAME_LABEL
    return pod_labels(pod).get(key) == "web"


def is_managed(ps: dict[str, Any], pod: Pod) -> bool:
    refs = pod["metadata"].get("ownerReferences") or []
    owned = any(r.get("uid") == UID and r.get("controller") for r in refs)
    return owned and is_active(pod) and selected(ps, pod)


# --- (1) never deletes pods it does not own ------------------------------------------------


@FAST
@given(ps=podsets(), pods=pod_lists(), satisfied=st.booleans())
def test_plan_only_touches_its_own_pods(
    ps: dict[str, Any], pods: list[Pod], satisfied: bool
) -> None:
    result = plan(ps, pods, T0, satisfied)
    by_name = {pod_name(p): p for p in pods}
    assert all(is_managed(ps, by_name[n]) for n in result.pods_to_delete)
    assert len(set(result.pods_to_delete)) == len(result.pods_to_delete)
    for name in result.pods_to_adopt:
        assert not by_name[name]["metadata"].get("ownerReferences")
        assert is_active(by_name[name])
        assert selected(ps, by_name[name])
    for name in result.pods_to_release:
        assert by_name[name]["metadata"]["ownerReferences"][0]["uid"] == UID
        assert not selected(ps, by_name[name])
    if result.pods_to_create:
        assert result.status.updated_replicas + result.pods_to_create <= ps["spec"]["replicas"]


# --- simulation ---------------------------------------------------------------------------


@dataclass
class Cluster:
    """A fake API server + kubelet applying plans instantly."""

    podset: dict[str, Any]
    pods: list[dict[str, Any]]
    now: datetime = T0
    created: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def plan(self) -> Plan:
        return plan(self.podset, self.pods, self.now, expectations_satisfied=True)

    def apply(self, result: Plan) -> None:
        by_name = {pod_name(p): p for p in self.pods}
        for name in result.pods_to_adopt:
            by_name[name]["metadata"]["ownerReferences"] = [owner_reference(self.podset)]
        for name in result.pods_to_release:
            by_name[name]["metadata"]["ownerReferences"] = []
        for _ in range(result.pods_to_create):
            assert result.pod_manifest is not None
            new = copy.deepcopy(dict(result.pod_manifest))
            new["metadata"]["name"] = f"web-{self.created}"
            new["metadata"]["creationTimestamp"] = iso(self.now)
            new["status"] = {"phase": "Pending"}
            self.created += 1
            self.pods.append(new)
        gone = set(result.pods_to_delete)
        self.pods = [p for p in self.pods if pod_name(p) not in gone]
        if result.status_patch is not None:  # a merge patch of the status subresource
            self.podset["status"] = {**self.podset.get("status", {}), **result.status_patch}

    def progress(self, chance: float, advance: timedelta) -> None:
        """Each active not-ready pod becomes ready with probability ``chance``; time passes.

        Like a real kubelet, it also stamps a Ready condition that lacks a lastTransitionTime
        (such a pod never counts as available when minReadySeconds > 0, as upstream).
        """
        for index, pod in enumerate(self.pods):
            for condition in pod["status"].get("conditions", []):
                condition.setdefault("lastTransitionTime", iso(self.now))
            if is_active(pod) and not is_ready(pod) and self.rng.random() < chance:
                pod["spec"]["nodeName"] = NODES[1 + index % 3]
                pod["status"] = {
                    "phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": iso(self.now)}
                    ],
                }
        self.now += advance

    def managed(self) -> list[Pod]:
        return [p for p in self.pods if is_managed(self.podset, p)]


def converged(cluster: Cluster) -> bool:
    managed = cluster.managed()
    return len(managed) == cluster.podset["spec"]["replicas"] and all(
        is_updated(p, HASH) for p in managed
    )


# --- (2) repeated planning converges -------------------------------------------------------


@SIM
@given(ps=podsets(), pods=pod_lists(max_size=8), seed=st.integers(0, 2**16))
def test_repeated_planning_converges(
    ps: dict[str, Any], pods: list[dict[str, Any]], seed: int
) -> None:
    cluster = Cluster(ps, copy.deepcopy(pods), rng=random.Random(seed))
    min_ready = ps["spec"]["minReadySeconds"]
    on_delete = ps["spec"]["updateStrategy"]["type"] == "OnDelete"
    for round_ in range(80):
        cluster.apply(cluster.plan())
        calm = round_ >= 10  # after a noisy start every pod turns ready each round
        cluster.progress(1.0 if calm else 0.5, timedelta(seconds=min_ready + 1))
        if on_delete and calm:  # OnDelete: a user deletes one outdated pod per round
            outdated = [p for p in cluster.managed() if not is_updated(p, HASH)]
            cluster.pods = [p for p in cluster.pods if p not in outdated[:1]]
        if calm and converged(cluster) and cluster.plan().is_empty:
            break
    assert converged(cluster)
    final = cluster.plan()
    assert final.is_empty
    assert final.status.available_replicas == ps["spec"]["replicas"]


# --- (3) rolling update bounds -------------------------------------------------------------


@SIM
@given(
    replicas=st.integers(1, 8),
    surge=FENCEPOSTS,
    unavailable=FENCEPOSTS,
    min_ready=st.sampled_from([0, 10]),
    chance=st.sampled_from([0.3, 0.7, 1.0]),
    seed=st.integers(0, 2**16),
    nodes=st.lists(st.sampled_from(NODES[1:]), min_size=8, max_size=8),
)
def test_rolling_update_stays_within_surge_and_unavailability(
    replicas: int,
    surge: int | str,
    unavailable: int | str,
    min_ready: int,
    chance: float,
    seed: int,
    nodes: list[str],
) -> None:
    ps = make_podset(replicas, "RollingUpdate", surge, unavailable, min_ready)
    old = [make_pod(f"old-{i}", hash_=OLD, node=nodes[i]) for i in range(replicas)]
    cluster = Cluster(ps, old, rng=random.Random(seed))
    max_surge, max_unavailable = resolve_fenceposts(surge, unavailable, replicas)

    def available() -> int:
        return sum(is_available(p, min_ready, cluster.now) for p in cluster.managed())

    for _ in range(120):
        result = cluster.plan()
        assert len(cluster.managed()) + result.pods_to_create <= replicas + max_surge
        cluster.apply(result)
        assert len(cluster.managed()) <= replicas + max_surge
        assert available() >= replicas - max_unavailable
        if converged(cluster) and result.is_empty:
            break
        cluster.progress(chance, timedelta(seconds=min_ready // 2 + 1))
    assert converged(cluster)


# --- (4) deletion ranking ------------------------------------------------------------------


def _after_or_zero(first: datetime | None, second: datetime | None) -> bool:
    if first is None or second is None:
        return first is None
    return first > second


def _log_less(first: datetime | None, second: datetime | None, a: Pod, b: Pod) -> bool:
    """Upstream's comparison of two different times with LogarithmicScaleDown on."""
    if first is None or second is None:
        return _after_or_zero(first, second)
    diff = log_bucket(first, T0) - log_bucket(second, T0)
    if diff == 0:
        return str(metadata(a).get("uid")) < str(metadata(b).get("uid"))
    return diff < 0


def upstream_less(a: Pod, b: Pod, on_node: Counter[str]) -> bool:
    """A literal transcription of k8s 1.36 ActivePodsWithRanks.Less (LogarithmicScaleDown)."""
    ordinal = {"Pending": 0, "Unknown": 1, "Running": 2}
    if node_name(a) != node_name(b) and (not node_name(a) or not node_name(b)):
        return not node_name(a)
    if ordinal.get(phase(a), 0) != ordinal.get(phase(b), 0):
        return ordinal.get(phase(a), 0) < ordinal.get(phase(b), 0)
    if is_ready(a) != is_ready(b):
        return not is_ready(a)
    if deletion_cost(a) != deletion_cost(b):
        return deletion_cost(a) < deletion_cost(b)
    if on_node[node_name(a)] != on_node[node_name(b)]:
        return on_node[node_name(a)] > on_node[node_name(b)]
    if is_ready(a) and is_ready(b) and ready_since(a) != ready_since(b):
        return _log_less(ready_since(a), ready_since(b), a, b)
    if max_restarts(a) != max_restarts(b):
        return max_restarts(a) > max_restarts(b)
    if max_sidecar_restarts(a) != max_sidecar_restarts(b):
        return max_sidecar_restarts(a) > max_sidecar_restarts(b)
    if creation_time(a) != creation_time(b):
        return _log_less(creation_time(a), creation_time(b), a, b)
    return False


def _upstream_skips_to_uid(a: Pod, b: Pod) -> bool:
    """The one case the ranking documents as different: both ready, ready times that differ
    but share a log2 bucket (upstream orders by UID at once, skipping restarts and creation)."""
    first, second = ready_since(a), ready_since(b)
    return (
        is_ready(a)
        and is_ready(b)
        and first is not None
        and second is not None
        and first != second
        and log_bucket(first, T0) == log_bucket(second, T0)
    )


@FAST
@given(pods=pod_lists(max_size=12, active_only=True), seed=st.integers(0, 2**16))
def test_deletion_ranking_agrees_with_upstream_on_every_pair(pods: list[Pod], seed: int) -> None:
    """No pair is ranked against upstream's Less, outside the documented case; the ranking
    does not depend on the input order."""
    on_node = Counter(node_name(p) for p in pods)
    shuffled = list(pods)
    random.Random(seed).shuffle(shuffled)
    ranked = rank_for_deletion(shuffled, pods, T0)
    assert [pod_name(p) for p in ranked] == [pod_name(p) for p in rank_for_deletion(pods, pods, T0)]
    for i, earlier in enumerate(ranked):
        for later in ranked[i + 1 :]:
            if (
                _upstream_skips_to_uid(earlier, later)
                and on_node[node_name(earlier)] == on_node[node_name(later)]
            ):
                continue
            assert not upstream_less(later, earlier, on_node), (pod_name(earlier), pod_name(later))
    ranked = rank_for_deletion(pods, pods, T0, HASH)
    updated = [is_updated(p, HASH) for p in ranked]
    assert updated == sorted(updated)  # outdated pods first, upstream order within each group


# --- (5) idempotence -----------------------------------------------------------------------


@FAST
@given(
    ps=podsets(),
    pods=pod_lists(),
    satisfied=st.booleans(),
    seed=st.integers(0, 2**16),
    with_status=st.booleans(),
)
def test_plan_is_idempotent(
    ps: dict[str, Any], pods: list[Pod], satisfied: bool, seed: int, with_status: bool
) -> None:
    if with_status:
        ps["status"] = dict(plan(ps, pods, T0 - timedelta(minutes=1), True).status_patch or {})
    snapshot = copy.deepcopy((ps, pods))
    first = plan(ps, pods, T0, satisfied)
    assert (ps, pods) == snapshot  # inputs are not mutated
    assert plan(ps, pods, T0, satisfied) == first
    shuffled = list(pods)
    random.Random(seed).shuffle(shuffled)
    assert plan(ps, shuffled, T0, satisfied) == first


# --- (6) any spec the CRD schema admits: no exception, only actions the API accepts --------

PODSET_NAMES = st.from_regex(DNS_SUBDOMAIN, fullmatch=True).filter(lambda n: len(n) <= 253) | (
    st.from_regex(r"[a-z0-9]{64,70}(\.[a-z0-9]{1,60}){0,3}", fullmatch=True)
)
"""Any object name, with long ones (over 63 characters, up to 253) often."""
PODSET_SPECS = from_schema(structural_schema(PodSetSpec))
STATUS_SCHEMA = structural_schema(PodSetStatus)
MAX_GENERATE_NAME_BASE = 58
"""The API server keeps this much of a generateName and appends 5 random characters."""


@st.composite
def schema_podsets(draw: st.DrawFn) -> tuple[dict[str, Any], list[Pod]]:
    """A PodSet with any spec the schema admits (CEL aside), and pods that it may select."""
    spec = draw(PODSET_SPECS)
    name = draw(PODSET_NAMES)
    if draw(st.booleans()):  # well-formed labels, and no selector or one the CEL rules admit
        labels = draw(LABELS)
        spec["template"]["metadata"] = {**spec["template"].get("metadata", {}), "labels": labels}
        spec.pop("selector", None)
        if draw(st.booleans()):
            keys = draw(st.lists(st.sampled_from(sorted(labels)), min_size=1, unique=True))
            spec["selector"] = {"matchLabels": {k: labels[k] for k in keys}}
    ps = {"metadata": {"name": name, "namespace": "ns", "uid": UID, "generation": 3}, "spec": spec}
    if draw(st.booleans()):
        ps["status"] = draw(from_schema(STATUS_SCHEMA))
    template = spec["template"]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    if "selector" not in spec:
        labels[NAME_LABEL] = name
    pods: list[Pod] = [
        make_pod(
            f"p{i}",
            owner=draw(st.sampled_from([UID, None])),
            labels=draw(st.sampled_from([labels, {}])),
            hash_=draw(st.sampled_from([template_hash(template), OLD])),
            phase=draw(st.sampled_from(["Running", "Pending", "Failed"])),
            ready=draw(st.booleans()),
        )
        for i in range(draw(st.integers(0, 5)))
    ]
    return ps, pods


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=schema_podsets(), satisfied=st.booleans())
def test_any_admitted_spec_plans_only_valid_requests(
    world: tuple[dict[str, Any], list[Pod]], satisfied: bool
) -> None:
    """The pod manifest's operator-made metadata is valid and its spec is the template's
    verbatim (the API server validates the rest at creation: refusals are Degraded); names
    to delete, adopt or release exist; the status after the merge patch fits the CRD."""
    ps, pods = world
    result = plan(ps, pods, T0, satisfied)
    names = {pod_name(p) for p in pods}
    assert set(result.pods_to_delete) | set(result.pods_to_adopt) <= names
    assert set(result.pods_to_release) <= names
    if result.pod_manifest is not None:
        meta = result.pod_manifest["metadata"]
        base = meta["generateName"][:MAX_GENERATE_NAME_BASE]
        assert is_dns_subdomain(base.rstrip("-") + "x1234"), meta["generateName"]
        assert meta["namespace"] == "ns"
        assert not label_errors(meta["labels"]), label_errors(meta["labels"])
        template = ps["spec"]["template"]
        assert meta.get("annotations") == (
            (template.get("metadata") or {}).get("annotations") or None
        )
        assert result.pod_manifest["spec"] == template["spec"]
        assert meta["ownerReferences"] == [owner_reference(ps)]
    if result.status_patch is not None:
        status = {**ps.get("status", {}), **result.status_patch}
        assert not schema_errors(status, STATUS_SCHEMA, ".status"), status


# --- (7) the cache's slim pod records plan exactly like whole pods --------------------------


def fattened(pod: dict[str, Any], seed: int) -> dict[str, Any]:
    """``pod`` with what the API server adds that planning never reads."""
    rng = random.Random(seed)
    fat = copy.deepcopy(pod)
    meta = fat["metadata"]
    meta["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    meta["resourceVersion"] = str(rng.randint(1, 10**6))
    meta.setdefault("annotations", {})["example.com/note"] = "x" * rng.randint(0, 50)
    fat["spec"]["containers"] = [{"name": "c", "image": "nginx:2", "env": [{"name": "A"}]}]
    fat["status"]["conditions"].insert(
        rng.randint(0, 1), {"type": "PodScheduled", "status": "True"}
    )
    fat["status"]["containerStatuses"].append({"name": "side", "restartCount": rng.randint(0, 3)})
    fat["status"]["hostIP"] = "10.0.0.1"
    return fat


@FAST
@given(ps=podsets(), pods=pod_lists(), satisfied=st.booleans(), seed=st.integers(0, 2**16))
def test_slim_records_plan_like_whole_pods(
    ps: dict[str, Any], pods: list[Pod], satisfied: bool, seed: int
) -> None:
    whole = [fattened(dict(p), seed + i) for i, p in enumerate(pods)]
    slim = [slim_pod(p) for p in whole]
    assert plan(ps, slim, T0, satisfied) == plan(ps, whole, T0, satisfied)
    for full, record in zip(whole, slim, strict=True):
        for predicate in (
            pod_name, pod_labels, node_name, phase, creation_time, is_active, is_ready,
            ready_since, max_restarts, deletion_cost,
        ):  # fmt: skip
            assert predicate(record) == predicate(full), predicate.__name__
        assert "managedFields" not in record["metadata"]
        assert "containers" not in record["spec"]
