"""Who asked for a PodDebugger, and whether they still may.

Admission checks the author once; the operator acts for as long as the PodDebugger exists. So
the requester policy (a MutatingAdmissionPolicy, ``requester-policy.yaml``) records who created
or last changed each PodDebugger in two annotations, and before acting the operator asks the
API server, with a SubjectAccessReview, whether that user (with those groups) may still patch
``pods/ephemeralcontainers`` in the namespace, as `kubectl debug` needs. A revoked right stops
the injections at the next pass (``RequesterNotAllowed``); passes follow the pods' events, nothing
polls. Answers are cached briefly, as
kube-rbac-proxy does, so a revocation takes effect within :data:`ALLOW_TTL` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.kube import KubeApi, resource_path
from opsuite_common.metrics_auth import TtlCache, UserInfo
from poddebugger_operator.models import GROUP

REQUESTED_BY = f"{GROUP}/requested-by"
"""The requester's username, as the API server authenticated it."""
REQUESTED_BY_GROUPS = f"{GROUP}/requested-by-groups"
"""The requester's groups, one per line."""
ALLOW_TTL = 10.0
"""Seconds an allowing review is reused: how long a revoked requester may still be acted for."""
DENY_TTL = 10.0
"""Seconds a denying review is reused."""
PARALLEL = 4
"""Reviews in flight at most."""


def requester(debugger: Mapping[str, Any]) -> UserInfo | None:
    """The user the annotations name, or None when none is recorded."""
    annotations = (debugger.get("metadata") or {}).get("annotations") or {}
    username = annotations.get(REQUESTED_BY)
    if not username:
        return None
    groups = tuple(g for g in str(annotations.get(REQUESTED_BY_GROUPS) or "").split("\n") if g)
    return UserInfo(username=str(username), groups=groups)


class RequesterReviews:
    """SubjectAccessReviews of requesters, through the operator's session, cached."""

    def __init__(self, kube: KubeApi, cache: TtlCache | None = None) -> None:
        self._kube = kube.unfenced(PARALLEL)
        self._cache = cache or TtlCache()

    async def problem(self, debugger: Mapping[str, Any], *, required: bool) -> str | None:
        """Why the operator may not act for ``debugger``'s requester, or None when it may
        (or, unless ``required``, when no requester is recorded: admission alone vouched)."""
        user = requester(debugger)
        if user is None:
            if not required:
                return None
            return (
                f"no requester recorded (annotation {REQUESTED_BY}, set at admission by the "
                "requester policy): re-apply the PodDebugger, or install the requester policy"
            )
        namespace = str((debugger.get("metadata") or {}).get("namespace") or "")
        key = (user, namespace)
        found, allowed = self._cache.get(key)
        if not found:
            allowed = await self._review(user, namespace)
            self._cache.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        if allowed:
            return None
        return (
            f"its requester {user.username} may no longer patch pods/ephemeralcontainers in "
            f"{namespace} (run kubectl debug there): nothing more is injected until they may, "
            "or someone who may re-applies it"
        )

    async def _review(self, user: UserInfo, namespace: str) -> bool:
        spec: dict[str, object] = {
            "user": user.username,
            "resourceAttributes": {
                "namespace": namespace,
                "verb": "patch",
                "resource": "pods",
                "subresource": "ephemeralcontainers",
            },
        }
        if user.groups:
            spec["groups"] = list(user.groups)
        review = await self._kube.create(
            resource_path("authorization.k8s.io/v1", "subjectaccessreviews"),
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return (review.get("status") or {}).get("allowed") is True
