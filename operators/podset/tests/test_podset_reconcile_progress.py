"""progressDeadlineSeconds: a rollout or scale that stops making progress is reported.

``rollout_progress`` is the pure rule (observed counts + the stored status + now -> the
Progressing condition, the last progress time and when to look again); ``plan`` wires it in.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsuite_testkit.podset import OLD, T0, TEMPLATE, UID, iso, pod
from podset_operator.reconcile import plan, rollout_progress
from podset_operator.spec import InvalidSpecError, parse_spec
from podset_operator.status import PROGRESS_DEADLINE_EXCEEDED, PodSetStatus, status_patch

DEADLINE = 600


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


def progressing(patch_or_status: Any) -> dict[str, Any]:
    return dict(next(c for c in patch_or_status["conditions"] if c["type"] == "Progressing"))


# A rollout of 4 that stalls: 3 old pods ready, 2 new ones never ready (surge 1, unavailable 1).
STALLED = [
    *(pod(f"old-{i}", hash_=OLD) for i in range(3)),
    pod("new-0", ready=False),
    pod("new-1", ready=False),
]


def step(ps: dict[str, Any], pods: list[dict[str, Any]], now: datetime) -> Any:
    """Plan at ``now`` and store the status written, as the controller would."""
    result = plan(ps, pods, now, True)
    if result.status_patch is not None:
        ps["status"] = {**ps.get("status", {}), **result.status_patch}
    return result


# --- the spec field ----------------------------------------------------------------------------


def test_progress_deadline_defaults_to_600_seconds() -> None:
    assert parse_spec(podset()).progress_deadline_seconds == DEADLINE
    assert parse_spec(podset(progressDeadlineSeconds=1)).progress_deadline_seconds == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"progressDeadlineSeconds": 0}, "spec.progressDeadlineSeconds: Input should be greater"),
        ({"progressDeadlineSeconds": "60"}, "spec.progressDeadlineSeconds: Input should be a"),
        (
            {"progressDeadlineSeconds": 30, "minReadySeconds": 30},
            "spec: progressDeadlineSeconds must be greater than minReadySeconds",
        ),
        (
            {"minReadySeconds": 601},  # the default deadline is not greater either
            "spec: progressDeadlineSeconds must be greater than minReadySeconds",
        ),
    ],
)
def test_progress_deadline_is_validated(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=re.escape(message)):
        parse_spec(podset(**overrides))


# --- examples through plan --------------------------------------------------------------------


def test_stalled_rollout_is_reported_at_the_deadline_and_only_then() -> None:
    ps = podset(progressDeadlineSeconds=DEADLINE)
    first = step(ps, STALLED, T0)
    assert ps["status"]["lastProgressTime"] == iso(T0)
    assert (progressing(ps["status"])["status"], progressing(ps["status"])["reason"]) == (
        "True",
        "RollingUpdate",
    )
    # Nothing else wakes the PodSet while its pods stay unready: it asks to be woken.
    assert first.requeue_after == DEADLINE

    # Pod events before the deadline change nothing: no write, and the same wake-up time.
    later = plan(ps, STALLED, T0 + timedelta(seconds=200), True)
    assert later.status_patch is None
    assert later.requeue_after == DEADLINE - 200

    # At the deadline: one write, Progressing False with the counts.
    due = step(ps, STALLED, T0 + timedelta(seconds=DEADLINE))
    assert due.status_patch is not None
    condition = progressing(ps["status"])
    assert (condition["status"], condition["reason"]) == ("False", PROGRESS_DEADLINE_EXCEEDED)
    assert condition["lastTransitionTime"] == iso(T0 + timedelta(seconds=DEADLINE))
    assert "2/4 updated" in condition["message"], condition
    assert "3/4 available" in condition["message"], condition
    assert f"{DEADLINE}s" in condition["message"], condition
    assert ps["status"]["lastProgressTime"] == iso(T0)
    assert due.requeue_after is None

    # Afterwards: a steady state again, nothing written, nothing to wait for.
    after = plan(ps, STALLED, T0 + timedelta(hours=5), True)
    assert after.status_patch is None
    assert after.requeue_after is None
    assert after.is_empty


def test_progress_after_the_deadline_makes_the_rollout_progressing_again() -> None:
    ps = podset(progressDeadlineSeconds=60)
    step(ps, STALLED, T0)
    step(ps, STALLED, T0 + timedelta(seconds=60))
    assert progressing(ps["status"])["reason"] == PROGRESS_DEADLINE_EXCEEDED
    # One new pod turns ready: progress.
    one_ready = [*STALLED[:3], pod("new-0"), pod("new-1", ready=False)]
    now = T0 + timedelta(seconds=90)
    result = step(ps, one_ready, now)
    condition = progressing(ps["status"])
    assert (condition["status"], condition["reason"]) == ("True", "RollingUpdate")
    assert condition["lastTransitionTime"] == iso(now)
    assert ps["status"]["lastProgressTime"] == iso(now)
    assert result.requeue_after == 60

    # Done: Complete, nothing to wait for; the last progress time stays.
    done = [pod(f"new-{i}") for i in range(4)]
    finished = step(ps, done, now + timedelta(seconds=5))
    assert (progressing(ps["status"])["status"], progressing(ps["status"])["reason"]) == (
        "False",
        "Complete",
    )
    assert ps["status"]["lastProgressTime"] == iso(now + timedelta(seconds=5))
    assert finished.requeue_after is None
    assert plan(ps, done, now + timedelta(days=1), True).is_empty


def test_a_spec_change_restarts_the_clock() -> None:
    ps = podset(progressDeadlineSeconds=60)
    step(ps, STALLED, T0)
    step(ps, STALLED, T0 + timedelta(seconds=60))
    assert progressing(ps["status"])["reason"] == PROGRESS_DEADLINE_EXCEEDED
    ps["metadata"]["generation"] = 2  # e.g. the template fixed, or the deadline raised
    now = T0 + timedelta(seconds=100)
    result = plan(ps, STALLED, now, True)
    assert result.status_patch is not None
    assert progressing(result.status_patch)["status"] == "True"
    assert result.status_patch["lastProgressTime"] == iso(now)


def test_a_complete_podset_has_no_deadline_and_writes_no_progress_time() -> None:
    ps = podset()
    pods = [pod(f"p{i}") for i in range(4)]
    first = step(ps, pods, T0)
    assert first.requeue_after is None
    assert "lastProgressTime" not in ps["status"]
    assert plan(ps, pods, T0 + timedelta(days=30), True).is_empty


def test_scale_up_that_cannot_create_pods_exceeds_the_deadline() -> None:
    """A scale-up whose creates keep failing (a quota) is a stalled rollout too."""
    ps = podset(6, progressDeadlineSeconds=30)
    pods = [pod(f"p{i}") for i in range(4)]
    step(ps, pods, T0)
    assert progressing(ps["status"])["reason"] == "ScalingUp"
    step(ps, pods, T0 + timedelta(seconds=30))
    condition = progressing(ps["status"])
    assert (condition["status"], condition["reason"]) == ("False", PROGRESS_DEADLINE_EXCEEDED)
    # Two more pods: progress, then complete.
    more = [*pods, pod("p4", ready=False)]
    step(ps, more, T0 + timedelta(seconds=40))
    assert progressing(ps["status"])["status"] == "True"


def test_requeue_is_the_earliest_of_min_ready_and_deadline() -> None:
    ps = podset(1, minReadySeconds=30, progressDeadlineSeconds=40)
    young = pod("a")
    young["status"]["conditions"][0]["lastTransitionTime"] = iso(T0 - timedelta(seconds=10))
    assert plan(ps, [young], T0, True).requeue_after == 20
    ps = podset(2, minReadySeconds=30, progressDeadlineSeconds=40)
    result = plan(ps, [young], T0, True)  # scaling up 1 -> 2
    assert result.requeue_after == 20


# --- the pure rule -----------------------------------------------------------------------------


def observed(
    replicas: int, updated: int, ready: int, available: int, desired: int = 4, generation: int = 1
) -> PodSetStatus:
    reason = (
        "RollingUpdate"
        if updated < replicas
        else "ScalingUp"
        if replicas < desired
        else "ScalingDown"
        if replicas > desired
        else None
    )
    return PodSetStatus(
        desired=desired,
        replicas=replicas,
        ready_replicas=ready,
        available_replicas=available,
        updated_replicas=updated,
        pod_names=tuple(f"p{i}" for i in range(replicas)),
        progressing=reason,
        selector="app=web",
        observed_generation=generation,
    )


def test_rollout_progress_counts_like_the_deployment_controller() -> None:
    before = observed(5, 2, 3, 3)
    stored = status_patch(
        {}, replace(before, progress=rollout_progress(before, {}, 60, T0)), None, T0
    )
    assert stored is not None
    later = T0 + timedelta(seconds=30)
    for after, progressed in [
        (before, False),
        (observed(5, 3, 3, 3), True),  # one more pod from the current template
        (observed(4, 2, 3, 3), True),  # one old pod fewer
        (observed(5, 2, 4, 3), True),  # one more ready
        (observed(5, 2, 3, 4), True),  # one more available
        (observed(5, 2, 2, 2), False),  # fewer ready is no progress
        (observed(5, 1, 3, 3), False),  # a new pod lost is no progress
        (observed(5, 2, 3, 3, generation=2), True),  # a spec change
    ]:
        result = rollout_progress(after, stored, 60, later)
        assert result.last_progress_time == iso(later if progressed else T0), after
        assert result.status == "True"


@settings(max_examples=300, deadline=None)
@given(
    deadline=st.integers(1, 900),
    steps=st.lists(
        st.tuples(
            st.integers(0, 1200),  # seconds since the previous observation
            st.integers(0, 6),  # replicas
            st.integers(0, 6),  # updated
            st.integers(0, 6),  # ready
            st.integers(0, 6),  # available
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_progressing_false_exactly_when_the_deadline_passed_without_progress(
    deadline: int, steps: list[tuple[int, int, int, int, int]]
) -> None:
    """Feeding observations in order (the status written each time): Progressing is False with
    ProgressDeadlineExceeded exactly when the PodSet is in flight and deadline seconds passed
    since its last progress; the wake-up time is that instant; the same observation again at
    the same time writes nothing; being woken at the wake-up time reports the deadline."""
    now = T0
    stored: dict[str, Any] = {}
    last_progress: datetime | None = None
    for gap, replicas, updated, ready, available in steps:
        now += timedelta(seconds=gap)
        updated = min(updated, replicas)
        ready = min(ready, replicas)
        available = min(available, ready)
        seen = observed(replicas, updated, ready, available)
        progress = rollout_progress(seen, stored, deadline, now)
        previous_condition = next(
            (c for c in stored.get("conditions", []) if c["type"] == "Progressing"), None
        )
        in_flight = seen.progressing is not None
        was_in_flight = previous_condition is not None and previous_condition["reason"] not in (
            "Complete",
        )
        if in_flight and (
            not was_in_flight
            or updated > stored["updatedReplicas"]
            or replicas - updated < stored["replicas"] - stored["updatedReplicas"]
            or ready > stored["readyReplicas"]
            or available > stored["availableReplicas"]
            or abs(replicas - 4) < abs(stored["replicas"] - 4)
        ):
            last_progress = now
        if not in_flight:
            assert (progress.status, progress.reason, progress.requeue_after) == (
                "False",
                "Complete",
                None,
            )
        else:
            assert last_progress is not None
            exceeded = now - last_progress >= timedelta(seconds=deadline)
            assert (progress.reason == PROGRESS_DEADLINE_EXCEEDED) == exceeded, progress
            assert (progress.status == "False") == exceeded, progress
            assert progress.last_progress_time == iso(last_progress)
            if exceeded:
                assert progress.requeue_after is None
            else:
                assert progress.requeue_after is not None
                wake = now + timedelta(seconds=progress.requeue_after)
                assert wake == last_progress + timedelta(seconds=deadline)
        patch = status_patch(stored, replace(seen, progress=progress), None, now)
        if patch is not None:
            stored = {**stored, **patch}
        again = replace(seen, progress=rollout_progress(seen, stored, deadline, now))
        assert status_patch(stored, again, None, now) is None, "a second look wrote again"
        if progress.requeue_after is not None:  # woken then, nothing having changed
            woken = rollout_progress(seen, stored, deadline, wake)
            assert (woken.status, woken.reason) == ("False", PROGRESS_DEADLINE_EXCEEDED)
