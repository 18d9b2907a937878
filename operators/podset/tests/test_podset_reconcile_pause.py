"""spec.paused: scaling goes on, template changes wait until the PodSet is resumed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_testkit.podset import HASH, OLD, T0, TEMPLATE, UID, iso, pod
from podset_operator.pod_state import TEMPLATE_HASH_LABEL
from podset_operator.reconcile import plan
from podset_operator.revisions import revision_name, slim_revision
from podset_operator.scaling import BURST_REPLICAS
from podset_operator.spec import parse_spec
from podset_operator.status import PAUSED
from podset_operator.template import template_hash


def podset(replicas: int = 4, generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": generation},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": TEMPLATE,
            "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            **spec,
        },
    }


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return dict(next(c for c in status["conditions"] if c["type"] == type_))


def step(ps: dict[str, Any], pods: list[dict[str, Any]], now: Any = T0) -> Any:
    """Plan at ``now`` and store the status written, as the controller would."""
    result = plan(ps, pods, now, True)
    if result.status_patch is not None:
        ps["status"] = {**ps.get("status", {}), **result.status_patch}
    return result


OUTDATED = [pod(f"old-{i}", hash_=OLD) for i in range(4)]


def test_paused_defaults_to_false() -> None:
    assert parse_spec(podset()).paused is False
    assert parse_spec(podset(paused=True)).paused is True


def test_a_paused_podset_does_not_roll_out_a_new_template() -> None:
    ps = podset(paused=True)
    result = step(ps, OUTDATED)
    assert (result.pods_to_create, result.pods_to_delete) == (0, ())
    progressing = condition(ps["status"], "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("Unknown", PAUSED)
    assert "0/4 updated" in progressing["message"], progressing
    # Ready tells the truth: the pods run an older template.
    assert condition(ps["status"], "Ready")["reason"] == "OutdatedReplicas"
    # No deadline runs while paused, and nothing is written again.
    assert result.requeue_after is None
    assert plan(ps, OUTDATED, T0 + timedelta(days=2), True).is_empty


def test_a_paused_podset_still_scales() -> None:
    up = plan(podset(6, paused=True), OUTDATED, T0, True)
    assert (up.pods_to_create, up.pods_to_delete) == (2, ())
    mixed = [*OUTDATED[:2], pod("new-0"), pod("new-1")]
    down = plan(podset(3, paused=True), mixed, T0, True)
    assert down.pods_to_create == 0
    assert len(down.pods_to_delete) == 1
    assert down.pods_to_delete[0].startswith("old-")  # outdated pods go first, as ever


def test_resuming_rolls_out_the_waiting_template_and_restarts_the_clock() -> None:
    ps = podset(paused=True)
    step(ps, OUTDATED)
    resumed = podset(generation=2, paused=False)
    resumed["status"] = ps["status"]
    now = T0 + timedelta(hours=1)
    result = step(resumed, OUTDATED, now)
    assert result.pods_to_create == 1  # maxSurge
    assert len(result.pods_to_delete) == 1  # maxUnavailable
    progressing = condition(resumed["status"], "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "RollingUpdate")
    assert resumed["status"]["lastProgressTime"] == iso(now)
    assert result.requeue_after == 600


def test_pausing_a_complete_podset_says_paused() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    ps = podset()
    step(ps, pods)
    assert condition(ps["status"], "Progressing")["reason"] == "Complete"
    paused = podset(generation=2, paused=True)
    paused["status"] = ps["status"]
    step(paused, pods)
    assert condition(paused["status"], "Progressing")["reason"] == PAUSED
    assert condition(paused["status"], "Ready")["status"] == "True"


@settings(max_examples=80, deadline=None)
@given(
    replicas=st.integers(0, 8),
    states=st.lists(
        st.tuples(st.sampled_from([HASH, OLD, "otherother"]), st.booleans()), max_size=10
    ),
    strategy=st.sampled_from(["RollingUpdate", "OnDelete"]),
)
def test_paused_only_ever_scales(
    replicas: int, states: list[tuple[str, bool]], strategy: str
) -> None:
    """Whatever the pods' templates and readiness: a paused PodSet creates exactly the missing
    pods and deletes exactly the surplus, outdated first; with the right count it does
    nothing to its pods, and its Progressing condition is Paused."""
    pods = [pod(f"p{i}", hash_=h, ready=r) for i, (h, r) in enumerate(states)]
    spec: dict[str, Any] = {"updateStrategy": {"type": strategy}, "paused": True}
    result = plan(podset(replicas, **spec), pods, T0, True)
    assert result.pods_to_create == min(max(0, replicas - len(pods)), BURST_REPLICAS)
    assert len(result.pods_to_delete) == max(0, len(pods) - replicas)
    deleted = set(result.pods_to_delete)
    kept_outdated = [p for p in pods if p["metadata"]["name"] not in deleted]
    kept_outdated = [
        p for p in kept_outdated if p["metadata"]["labels"][TEMPLATE_HASH_LABEL] != HASH
    ]
    deleted_updated = [
        p
        for p in pods
        if p["metadata"]["name"] in deleted and p["metadata"]["labels"][TEMPLATE_HASH_LABEL] == HASH
    ]
    assert not (kept_outdated and deleted_updated), "an updated pod went before an outdated one"
    assert result.status_patch is not None
    progressing = condition(dict(result.status_patch), "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("Unknown", PAUSED)


OLD_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]},
}


def _revision(template: dict[str, Any], number: int) -> dict[str, Any]:
    """A ControllerRevision of the PodSet, as the revision cache keeps it."""
    hash_ = template_hash(template)
    return slim_revision(
        {
            "metadata": {
                "name": revision_name("web", hash_),
                "namespace": "ns",
                "uid": f"rev-{number}",
                "labels": {TEMPLATE_HASH_LABEL: hash_},
                "ownerReferences": [
                    {
                        "apiVersion": "apps.opsuite.dev/v1alpha1",
                        "kind": "PodSet",
                        "name": "web",
                        "uid": UID,
                        "controller": True,
                    }
                ],
            },
            "revision": number,
            "data": {"template": template},
        }
    )


def test_a_paused_podset_scales_up_with_the_template_its_pods_run() -> None:
    """As a paused Deployment scales its existing ReplicaSets: the pods added while paused are
    of the current revision (the template of the pods), not of the template that waits."""
    old = template_hash(OLD_TEMPLATE)
    pods = [pod(f"old-{i}", hash_=old) for i in range(4)]
    revisions = [_revision(OLD_TEMPLATE, 1), _revision(TEMPLATE, 2)]
    ps = podset(6, paused=True)
    ps["status"] = {"currentRevision": revision_name("web", old)}
    up = plan(ps, pods, T0, True, revisions=revisions)
    assert up.pods_to_create == 2
    assert up.pod_manifest is not None
    assert up.pod_manifest["metadata"]["labels"][TEMPLATE_HASH_LABEL] == old
    assert up.pod_manifest["spec"] == OLD_TEMPLATE["spec"]
    # Resumed, the waiting template is the one new pods get.
    ps["spec"]["paused"] = False
    resumed = plan(ps, pods, T0, True, revisions=revisions)
    assert resumed.pod_manifest is not None
    assert resumed.pod_manifest["metadata"]["labels"][TEMPLATE_HASH_LABEL] == HASH
    # A revision the cache lost (deleted by hand) leaves the spec's template.
    ps["spec"]["paused"] = True
    lost = plan(ps, pods, T0, True, revisions=revisions[1:])
    assert lost.pod_manifest is not None
    assert lost.pod_manifest["metadata"]["labels"][TEMPLATE_HASH_LABEL] == HASH


def test_a_revision_whose_data_is_not_the_template_it_names_is_never_used() -> None:
    """Someone allowed to write ControllerRevisions crafts one under the current revision's
    name, controlled by the PodSet, with other data: new pods keep the spec's template."""
    old = template_hash(OLD_TEMPLATE)
    crafted = _revision(OLD_TEMPLATE, 1)
    crafted["data"] = {"template": {**OLD_TEMPLATE, "spec": {"containers": [{"name": "x"}]}}}
    ps = podset(6, paused=True)
    ps["status"] = {"currentRevision": revision_name("web", old)}
    pods = [pod(f"old-{i}", hash_=old) for i in range(4)]
    up = plan(ps, pods, T0, True, revisions=[crafted, _revision(TEMPLATE, 2)])
    assert up.pod_manifest is not None
    assert up.pod_manifest["metadata"]["labels"][TEMPLATE_HASH_LABEL] == HASH
