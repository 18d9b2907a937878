"""The requester check: who the annotations name, the review asked, its cache, and the plan."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from opsuite_common.metrics_auth import TtlCache, UserInfo
from opsuite_common.requester import (
    ALLOW_TTL,
    DENY_TTL,
    REQUESTER_NOT_ALLOWED,
    RequesterReviews,
    requester,
)
from poddebugger_operator.models import API_VERSION, GROUP, KIND
from poddebugger_operator.reconcile import plan
from poddebugger_operator.requester import REQUESTED_BY, REQUESTED_BY_GROUPS, needs


class Reviews:
    """The API server's side: allows the users in ``allowed``, records every review."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[Mapping[str, Any]] = []

    def unfenced(self, parallel: int) -> Reviews:
        return self

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        assert path.endswith("/apis/authorization.k8s.io/v1/subjectaccessreviews"), path
        self.asked.append(body["spec"])
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _debugger(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "shell", "namespace": "team-a", "uid": "u1", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "image": "x.io/y"},
    }
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    return obj


NEEDS = needs({"metadata": {"namespace": "team-a"}})
ALICE = {REQUESTED_BY: "alice", REQUESTED_BY_GROUPS: "dev\nsystem:authenticated"}


def test_the_annotations_name_the_user_and_groups() -> None:
    assert requester(_debugger(ALICE), GROUP) == UserInfo(
        "alice", groups=("dev", "system:authenticated")
    )
    assert requester(_debugger({REQUESTED_BY: ""}), GROUP) is None
    assert requester(_debugger(), GROUP) is None


async def test_the_review_asks_for_kubectl_debug_in_the_namespace_and_is_cached() -> None:
    api, clock = Reviews({"alice"}), Clock()
    reviews = RequesterReviews(api, TtlCache(clock=clock))  # type: ignore[arg-type]
    assert await reviews.problem(_debugger(ALICE), GROUP, NEEDS, required=True) is None
    assert api.asked == [
        {
            "user": "alice",
            "groups": ["dev", "system:authenticated"],
            "resourceAttributes": {
                "namespace": "team-a",
                "verb": "patch",
                "resource": "pods",
                "subresource": "ephemeralcontainers",
            },
        }
    ]
    api.allowed.clear()  # revoked
    clock.now = ALLOW_TTL - 1
    assert await reviews.problem(_debugger(ALICE), GROUP, NEEDS, required=True) is None
    clock.now = ALLOW_TTL
    problem = await reviews.problem(_debugger(ALICE), GROUP, NEEDS, required=True)
    assert problem is not None
    assert "alice may no longer patch pods/ephemeralcontainers in team-a" in problem
    api.allowed.add("alice")
    clock.now += DENY_TTL
    assert await reviews.problem(_debugger(ALICE), GROUP, NEEDS, required=True) is None
    assert len(api.asked) == 3


@pytest.mark.parametrize(("required", "blocked"), [(True, True), (False, False)])
async def test_without_a_recorded_requester_only_required_refuses(
    required: bool, blocked: bool
) -> None:
    api = Reviews(set())
    problem = await RequesterReviews(api).problem(_debugger(), GROUP, NEEDS, required=required)  # type: ignore[arg-type]
    assert (problem is not None) == blocked
    assert api.asked == []


def test_a_refused_requester_injects_nothing_and_says_why() -> None:
    pod = {
        "metadata": {"name": "web-1", "namespace": "team-a", "uid": "p1", "labels": {"app": "web"}},
        "status": {"phase": "Running"},
    }
    actions = plan(_debugger(ALICE), [pod], datetime.now(UTC), requester="alice may no longer")
    assert actions.injections == ()
    assert actions.status_patch is not None
    ready = next(c for c in actions.status_patch["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", REQUESTER_NOT_ALLOWED)
    assert ready["message"] == "alice may no longer"
    assert plan(_debugger(ALICE), [pod], datetime.now(UTC)).injections
