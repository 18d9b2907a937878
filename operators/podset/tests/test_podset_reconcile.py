"""Example-based tests of pod predicates, ownership, deletion ranking, scaling, rollout and plan."""

from datetime import timedelta
from typing import Any

import pytest

from opsuite_common.kube_model import LabelSelector
from opsuite_common.requester import REQUESTER_NOT_ALLOWED
from opsuite_testkit.podset import HASH, OLD, T0, TEMPLATE, UID, iso, pod
from podset_operator.models import MAX_POD_NAMES, NAME_LABEL, PodSetStatus
from podset_operator.ownership import claim_pods
from podset_operator.pod_ranking import log_bucket, rank_for_deletion, select_victims
from podset_operator.pod_state import (
    TEMPLATE_HASH_LABEL,
    controller_ref,
    deletion_cost,
    is_active,
    is_available,
    is_ready,
    max_restarts,
    max_sidecar_restarts,
    pod_name,
)
from podset_operator.reconcile import Plan, plan
from podset_operator.rollout import rolling_update_step
from podset_operator.scaling import BURST_REPLICAS, replica_set_step
from podset_operator.status import FAILED_CREATE, Failure

SELECTOR = LabelSelector(match_labels={"app": "web"})


def podset(replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": TEMPLATE,
            **spec,
        },
    }


def names(pods: Any) -> list[str]:
    return [pod_name(p) for p in pods]


# --- pod predicates -------------------------------------------------------------------------


def test_active_excludes_terminal_and_terminating() -> None:
    assert is_active(pod("a", phase="Pending"))
    assert not is_active(pod("a", phase="Succeeded"))
    assert not is_active(pod("a", phase="Failed"))
    assert not is_active(pod("a", deleting=True))


def test_availability_honours_min_ready_seconds() -> None:
    ready_10s = pod("a", ready_at=T0 - timedelta(seconds=10))
    assert is_ready(ready_10s)
    assert is_available(ready_10s, 10, T0)
    assert not is_available(ready_10s, 11, T0)
    assert is_available(pod("a", ready_at=None), 0, T0)
    assert not is_available(pod("a", ready_at=None), 1, T0)
    assert not is_available(pod("a", ready=False), 0, T0)


@pytest.mark.parametrize(
    ("raw", "cost"),
    [("5", 5), ("-3", -3), ("0", 0), ("+1", 0), ("007", 0), ("x", 0), ("2147483648", 0), (None, 0)],
)
def test_deletion_cost_parsing(raw: str | None, cost: int) -> None:
    assert deletion_cost(pod("a", cost=raw)) == cost


def test_restarts_and_controller_ref() -> None:
    assert max_restarts(pod("a", restarts=4)) == 4
    assert max_sidecar_restarts(pod("a", restarts=4)) == 0
    assert max_sidecar_restarts(pod("a", sidecar_restarts=7)) == 7
    shared = pod("a", owner=None)
    shared["metadata"]["ownerReferences"] = [{"uid": "x", "controller": False}]
    assert controller_ref(shared) is None


# --- ownership ------------------------------------------------------------------------------


def test_claim_pods() -> None:
    pods = [
        pod("owned"),
        pod("orphan", owner=None),
        pod("orphan-other-app", owner=None, labels={"app": "db"}),
        pod("foreign", owner="someone-else"),
        pod("relabelled", labels={"app": "db"}),
        pod("relabelled-failed", labels={"app": "db"}, phase="Failed"),
        pod("orphan-terminating", owner=None, deleting=True),
        pod("orphan-succeeded", owner=None, phase="Succeeded"),
    ]
    claim = claim_pods(pods, UID, SELECTOR, owner_deleting=False)
    assert names(claim.owned) == ["owned"]
    assert names(claim.adopt) == ["orphan"]
    assert names(claim.release) == ["relabelled"]
    assert names(claim.managed) == ["owned", "orphan"]


def test_claim_nothing_while_owner_deleting() -> None:
    pods = [pod("owned"), pod("orphan", owner=None), pod("relabelled", labels={"app": "db"})]
    claim = claim_pods(pods, UID, SELECTOR, owner_deleting=True)
    assert (names(claim.owned), claim.adopt, claim.release) == (["owned"], (), ())


# --- deletion ranking -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (pod("x", node=""), pod("y", phase="Pending", ready=False)),
        (pod("x", phase="Pending", ready=False), pod("y", phase="Unknown", ready=False)),
        (pod("x", phase="Unknown"), pod("y", phase="Running")),
        (pod("x", phase="", ready=False), pod("y", phase="Unknown", ready=False)),
        (pod("x", ready=False), pod("y", restarts=9, cost="-5")),
        (pod("x", cost="-1"), pod("y", restarts=9)),
        (pod("x", ready_at=T0 - timedelta(minutes=1)), pod("y", restarts=9)),
        (pod("x", ready_at=None), pod("y", ready_at=T0 - timedelta(minutes=1))),
        (pod("x", restarts=2), pod("y", created=T0)),
        # Sidecars (init containers with restartPolicy Always) break ties of regular restarts;
        # a plain init container's restarts never count.
        (pod("x", restarts=1, sidecar_restarts=3), pod("y", restarts=1, sidecar_restarts=0)),
        (pod("x", restarts=1, sidecar_restarts=0), pod("y", restarts=0, sidecar_restarts=9)),
        # LogarithmicScaleDown: ready 100 and 101 minutes ago fall in one log2 bucket
        # (2^42 ns is 73 minutes), so restarts decide, not which became ready last ...
        (
            pod("x", ready_at=T0 - timedelta(minutes=101), restarts=1),
            pod("y", ready_at=T0 - timedelta(minutes=100)),
        ),
        # ... and without restarts, the UID: uid-a before uid-b although b is newer.
        (
            pod("a", ready_at=T0 - timedelta(minutes=101), created=T0 - timedelta(minutes=200)),
            pod("b", ready_at=T0 - timedelta(minutes=100), created=T0 - timedelta(minutes=199)),
        ),
        # Different buckets: the more recently ready goes first, whatever the UID.
        (pod("z", ready_at=T0 - timedelta(minutes=30)), pod("a", ready_at=T0 - timedelta(hours=3))),
        (pod("x", created=T0), pod("y")),
        (pod("x", created=None), pod("y", created=T0)),
        (pod("a"), pod("b")),
    ],
)
def test_ranking_criteria(first: dict[str, Any], second: dict[str, Any]) -> None:
    related = [first, second]
    assert names(rank_for_deletion([second, first], related, T0)) == names(related)
    assert names(rank_for_deletion([first, second], related, T0)) == names(related)


def test_log_bucket_is_upstreams_log2_of_nanoseconds() -> None:
    assert log_bucket(T0, T0) == -1
    assert log_bucket(T0 + timedelta(seconds=1), T0) == -1
    assert log_bucket(T0 - timedelta(microseconds=1), T0) == 9  # 1000 ns
    assert log_bucket(T0 - timedelta(seconds=1), T0) == 29  # 10^9 ns < 2^30
    assert log_bucket(T0 - timedelta(minutes=100), T0) == 42


def test_ranking_prefers_doubled_up_nodes() -> None:
    crowded = [pod("c1", node="n1"), pod("c2", node="n1"), pod("lonely", node="n2")]
    victims = select_victims(crowded, 1, crowded, T0)
    assert names(victims) == ["c1"]


def test_ranking_not_ready_beats_colocation_and_cost() -> None:
    pods = [
        pod("c1", node="n1", cost="-9"),
        pod("c2", node="n1"),
        pod("nr", ready=False, node="n2"),
    ]
    assert names(select_victims(pods, 1, pods, T0)) == ["nr"]


def test_ranking_prefers_outdated_when_hash_given() -> None:
    pods = [pod("new", ready=False), pod("old", hash_=OLD)]
    assert names(select_victims(pods, 1, pods, T0, HASH)) == ["old"]
    assert names(select_victims(pods, 1, pods, T0)) == ["new"]
    assert select_victims(pods, 0, pods, T0) == ()


# --- scaling --------------------------------------------------------------------------------


def test_replica_set_step_caps_creations_at_burst() -> None:
    assert replica_set_step([], [], 2 * BURST_REPLICAS, HASH, T0).creates == BURST_REPLICAS
    assert replica_set_step([], [], 3, HASH, T0).creates == 3


def test_replica_set_step_deletes_by_rank_from_deletable_only() -> None:
    pods = [pod("ready"), pod("pending", phase="Pending", ready=False), pod("adopting", node="")]
    step = replica_set_step(pods, pods[:2], 1, HASH, T0)
    assert (step.creates, names(step.deletes)) == (0, ["pending", "ready"])


def test_steady_state_step_is_empty() -> None:
    pods = [pod("a"), pod("b")]
    step = replica_set_step(pods, pods, 2, HASH, T0)
    assert (step.creates, step.deletes) == (0, ())


# --- rolling update -------------------------------------------------------------------------


def test_rolling_update_first_step_matches_deployment() -> None:
    # 10 replicas, surge 3, unavailable 2: create 3 new pods and drop 2 available old pods.
    old = [pod(f"old-{i}", hash_=OLD) for i in range(10)]
    step = rolling_update_step(old, old, 10, (3, 2), HASH, 0, T0)
    assert step.creates == 3
    assert len(step.deletes) == 2


def test_rolling_update_waits_for_new_pods_to_become_available() -> None:
    old = [pod(f"old-{i}", hash_=OLD) for i in range(3)]
    new = [pod("new-0", ready=False)]
    managed = old + new
    step = rolling_update_step(managed, managed, 3, (1, 0), HASH, 0, T0)
    assert (step.creates, step.deletes) == (0, ())
    new_ready = [pod("new-0")]
    step = rolling_update_step(old + new_ready, old + new_ready, 3, (1, 0), HASH, 0, T0)
    assert (step.creates, len(step.deletes)) == (0, 1)
    assert names(step.deletes)[0].startswith("old-")


def test_rolling_update_surge_zero_deletes_before_creating() -> None:
    old = [pod(f"old-{i}", hash_=OLD) for i in range(3)]
    step = rolling_update_step(old, old, 3, (0, 1), HASH, 0, T0)
    assert (step.creates, len(step.deletes)) == (0, 1)
    step = rolling_update_step(old[:2], old[:2], 3, (0, 1), HASH, 0, T0)
    assert (step.creates, step.deletes) == (1, ())


def test_rolling_update_cleans_unhealthy_old_pods_first() -> None:
    old = [pod("old-ok", hash_=OLD), pod("old-bad", hash_=OLD, ready=False)]
    step = rolling_update_step(old, old, 2, (0, 1), HASH, 0, T0)
    assert names(step.deletes) == ["old-bad"]


def test_rolling_update_respects_min_ready_seconds() -> None:
    old = [pod(f"old-{i}", hash_=OLD) for i in range(2)]
    fresh = pod("new-0", ready_at=T0 - timedelta(seconds=5))
    managed = [*old, fresh]
    assert rolling_update_step(managed, managed, 2, (1, 0), HASH, 30, T0).deletes == ()
    later = T0 + timedelta(seconds=25)
    assert len(rolling_update_step(managed, managed, 2, (1, 0), HASH, 30, later).deletes) == 1


def test_rolling_update_scales_down_surplus_new_pods() -> None:
    managed = [pod("old", hash_=OLD), pod("new-0"), pod("new-1"), pod("new-2", ready=False)]
    step = rolling_update_step(managed, managed, 2, (1, 0), HASH, 0, T0)
    assert (step.creates, names(step.deletes)) == (0, ["new-2"])


# --- plan -----------------------------------------------------------------------------------


def converge_status(ps: dict[str, Any], pods: list[dict[str, Any]]) -> Plan:
    """Plan once and store the resulting status on the PodSet, as the handler would."""
    result = plan(ps, pods, T0, True)
    if result.status_patch is not None:
        ps["status"] = dict(result.status_patch)
    return result


def test_plan_scale_up_renders_manifest() -> None:
    ps = podset(3)
    result = plan(ps, [pod("a")], T0, True)
    assert result.pods_to_create == 2
    assert result.pod_manifest is not None
    assert result.pod_manifest["metadata"]["labels"][TEMPLATE_HASH_LABEL] == HASH
    assert result.status.progressing == "ScalingUp"


def test_plan_steady_state_is_empty() -> None:
    ps, pods = podset(2), [pod("a"), pod("b")]
    assert not converge_status(ps, pods).is_empty
    again = plan(ps, pods, T0 + timedelta(minutes=5), True)
    assert again.is_empty
    assert again == Plan(status=again.status)


def test_plan_status_and_conditions() -> None:
    ps = podset(3)
    pods = [pod("b"), pod("a", hash_=OLD, ready=False), pod("c", phase="Pending", ready=False)]
    result = plan(ps, pods, T0, False, Failure(FAILED_CREATE, "quota exceeded"))
    patch = result.status_patch
    assert patch is not None
    assert {k: patch[k] for k in ("replicas", "readyReplicas", "availableReplicas")} == {
        "replicas": 3,
        "readyReplicas": 1,
        "availableReplicas": 1,
    }
    assert (patch["updatedReplicas"], patch["podNames"], patch["observedGeneration"]) == (
        2,
        ["a", "b", "c"],
        1,
    )
    conditions = {c["type"]: c for c in patch["conditions"]}
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "ReplicasUnavailable",
    )
    assert (conditions["Progressing"]["status"], conditions["Progressing"]["reason"]) == (
        "True",
        "RollingUpdate",
    )
    assert conditions["Degraded"] == {
        "type": "Degraded",
        "status": "True",
        "reason": "FailedCreate",
        "message": "quota exceeded",
        "lastTransitionTime": iso(T0),
        "observedGeneration": 1,
    }
    assert {c["observedGeneration"] for c in patch["conditions"]} == {1}
    assert patch["selector"] == "app=web"


def test_condition_transition_time_is_kept_while_status_holds() -> None:
    ps, pods = podset(2), [pod("a")]
    converge_status(ps, pods)
    later = plan(ps, [*pods, pod("b", ready=False)], T0 + timedelta(minutes=1), True)
    assert later.status_patch is not None
    conditions = {c["type"]: c for c in later.status_patch["conditions"]}
    assert conditions["Ready"]["lastTransitionTime"] == iso(T0)  # still False
    assert conditions["Progressing"]["status"] == "False"
    assert conditions["Progressing"]["lastTransitionTime"] == iso(T0 + timedelta(minutes=1))


def test_plan_outdated_ready_condition() -> None:
    ps = podset(1, updateStrategy={"type": "OnDelete"})
    patch = plan(ps, [pod("a", hash_=OLD)], T0, True).status_patch
    assert patch is not None
    conditions = {c["type"]: c for c in patch["conditions"]}
    assert (conditions["Ready"]["reason"], conditions["Progressing"]["status"]) == (
        "OutdatedReplicas",
        "False",
    )


def test_plan_waits_for_expectations() -> None:
    pods = [pod("orphan", owner=None), pod("relabelled", labels={"app": "db"})]
    result = plan(podset(3), pods, T0, False)
    assert (result.pods_to_create, result.pods_to_delete) == (0, ())
    assert (result.pods_to_adopt, result.pods_to_release) == (("orphan",), ("relabelled",))
    assert result.status.replicas == 1


def test_plan_does_nothing_but_status_while_podset_deleting() -> None:
    ps = podset(3)
    ps["metadata"]["deletionTimestamp"] = iso(T0)
    result = plan(ps, [pod("a"), pod("orphan", owner=None)], T0, True)
    assert (result.pods_to_create, result.pods_to_adopt, result.pods_to_delete) == (0, (), ())
    assert result.status_patch is not None


def test_plan_never_deletes_pods_being_adopted_or_foreign() -> None:
    pods = [pod("orphan", owner=None), pod("foreign", owner="other"), pod("mine")]
    result = plan(podset(0), pods, T0, True)
    assert result.pods_to_adopt == ("orphan",)
    assert result.pods_to_delete == ("mine",)


def test_plan_on_delete_only_replaces_missing_pods() -> None:
    ps = podset(3, updateStrategy={"type": "OnDelete"})
    result = plan(ps, [pod("a", hash_=OLD), pod("b", hash_=OLD)], T0, True)
    assert (result.pods_to_create, result.pods_to_delete) == (1, ())
    # The lone outdated pod goes first although the crowded node would otherwise rank earlier.
    surplus = [pod("a", hash_=OLD, node="n2"), pod("b"), pod("c"), pod("d")]
    assert plan(ps, surplus, T0, True).pods_to_delete == ("a",)


def test_plan_rolling_update() -> None:
    ps = podset(4)  # 25%/25% of 4: surge 1, unavailable 1
    result = plan(ps, [pod(f"old-{i}", hash_=OLD) for i in range(4)], T0, True)
    assert (result.pods_to_create, len(result.pods_to_delete)) == (1, 1)


def test_plan_invalid_spec_reports_degraded() -> None:
    ps = podset(2, selector={"matchLabels": {"app": "db"}})
    ps["metadata"]["generation"] = 4
    ps["status"] = {"selector": "app=db"}
    result = plan(ps, [pod("a"), pod("orphan", owner=None)], T0, True)
    assert (result.pods_to_create, result.pods_to_adopt) == (0, ())
    assert result.status.replicas == 1
    patch = result.status_patch
    assert patch is not None
    assert patch["observedGeneration"] == 4
    assert "selector" not in patch  # left as it was
    conditions = {c["type"]: c for c in patch["conditions"]}
    message = "spec.selector: selector does not match template labels"
    assert {t: (c["status"], c["reason"], c["message"]) for t, c in conditions.items()} == {
        "Ready": ("False", "InvalidSpec", message),
        "Available": ("False", "InvalidSpec", message),
        "Progressing": ("False", "InvalidSpec", message),
        "Degraded": ("True", "InvalidSpec", message),
    }
    assert {c["observedGeneration"] for c in conditions.values()} == {4}
    ps["status"] = {**ps["status"], **patch}
    assert plan(ps, [pod("a")], T0 + timedelta(minutes=1), True).is_empty


def test_plan_schema_violation_reports_degraded() -> None:
    ps = podset(-1)
    ps["spec"]["template"] = "nonsense"
    patch = plan(ps, [pod("a")], T0, True).status_patch
    assert patch is not None
    degraded = next(c for c in patch["conditions"] if c["type"] == "Degraded")
    assert degraded["message"] == (
        "spec.replicas: Input should be greater than or equal to 0 (and 1 more)"
    )


def test_plan_without_selector_uses_the_name_label() -> None:
    ps = podset(3)
    del ps["spec"]["selector"]
    mine = pod("mine", labels={"app": "web", NAME_LABEL: "web"})
    orphan = pod("orphan", owner=None, labels={NAME_LABEL: "web"})
    stranger = pod("stranger", owner=None)  # app=web alone no longer matches
    relabelled = pod("relabelled")  # owned, but without the name label
    result = plan(ps, [mine, orphan, stranger, relabelled], T0, True)
    assert (result.pods_to_adopt, result.pods_to_release) == (("orphan",), ("relabelled",))
    assert result.pods_to_create == 1
    assert result.pod_manifest is not None
    assert result.pod_manifest["metadata"]["labels"] == {
        "app": "web",
        NAME_LABEL: "web",
        TEMPLATE_HASH_LABEL: HASH,
    }
    assert result.status.selector == f"{NAME_LABEL}=web"
    assert result.status_patch is not None
    assert result.status_patch["selector"] == f"{NAME_LABEL}=web"


def test_status_patch_keeps_foreign_conditions_and_is_none_when_unchanged() -> None:
    ps, pods = podset(2), [pod("a"), pod("b")]
    foreign = {
        "type": "Example",
        "status": "True",
        "reason": "Set",
        "message": "",
        "lastTransitionTime": iso(T0),
    }
    ps["status"] = {"conditions": [foreign]}
    patch = converge_status(ps, pods).status_patch
    assert patch is not None
    assert [c["type"] for c in patch["conditions"]] == [
        "Example",
        "Ready",
        "Available",
        "Progressing",
        "Degraded",
    ]
    assert plan(ps, pods, T0 + timedelta(hours=1), True).status_patch is None
    ps["metadata"]["generation"] = 2  # a no-op spec change still bumps observedGeneration
    bumped = plan(ps, pods, T0 + timedelta(hours=1), True).status_patch
    assert bumped is not None
    assert bumped["observedGeneration"] == 2
    assert all(c["lastTransitionTime"] == iso(T0) for c in bumped["conditions"])


def test_plan_requeues_until_min_ready_seconds_pass() -> None:
    ps = podset(1, minReadySeconds=30)
    result = plan(ps, [pod("a", ready_at=T0 - timedelta(seconds=10))], T0, True)
    assert result.requeue_after == 20
    assert result.status.available_replicas == 0


def test_plan_ignores_other_namespaces_and_accepts_naive_now() -> None:
    elsewhere = pod("a")
    elsewhere["metadata"]["namespace"] = "other"
    result = plan(podset(1), [elsewhere], T0.replace(tzinfo=None), True)
    assert result.pods_to_create == 1


def test_pod_names_are_bounded_and_the_count_is_whole() -> None:
    """status.podNames lists the first MAX_POD_NAMES names, sorted; status.replicas counts
    every pod (a status listing 20,000 names would near etcd's object limit and change on
    every pod event)."""
    many = MAX_POD_NAMES + 50
    ps = podset(many)
    pods = [pod(f"p{i:05d}") for i in range(many)]
    patch = plan(ps, pods, T0, True).status_patch
    assert patch is not None
    assert patch["replicas"] == many
    assert patch["podNames"] == sorted(p["metadata"]["name"] for p in pods)[:MAX_POD_NAMES]
    PodSetStatus.model_validate(patch)  # within the CRD's maxItems
    assert (
        PodSetStatus.model_json_schema(by_alias=True)["properties"]["podNames"]["anyOf"][0][
            "maxItems"
        ]
        == MAX_POD_NAMES
    )


def test_a_refused_requester_gets_no_pod_created_deleted_or_adopted() -> None:
    orphan = pod("orphan", owner=None, labels={"app": "web"})
    extra = [pod(f"web-{i}") for i in range(3)]
    wanted = plan(podset(3), [orphan], T0, True)
    assert wanted.pods_to_create
    assert wanted.pods_to_adopt
    assert plan(podset(1), extra, T0, True).pods_to_delete
    for pods, replicas in (([orphan], 3), (extra, 1)):
        refused = plan(podset(replicas), pods, T0, True, requester="alice may no longer")
        assert (refused.pods_to_create, refused.pods_to_delete, refused.pods_to_adopt) == (
            0,
            (),
            (),
        )
        assert refused.status_patch is not None
        degraded = next(c for c in refused.status_patch["conditions"] if c["type"] == "Degraded")
        assert (degraded["status"], degraded["reason"]) == ("True", REQUESTER_NOT_ALLOWED)
        assert degraded["message"] == "alice may no longer"
