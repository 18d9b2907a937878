"""Who asked for a custom resource, and whether they still may.

Admission checks a custom resource's author once; an operator acts for as long as the object
exists. So a MutatingAdmissionPolicy (:mod:`opsuite_packaging.requester_policy`)
records who created the object or last changed its spec in two annotations, and before acting
the operator asks the API server, with SubjectAccessReviews, whether that user (with those
groups) may still do by hand what the operator would do for them. Answers are cached briefly,
as kube-rbac-proxy does, so a revocation takes effect within :data:`ALLOW_TTL` seconds; the
operator's passes follow events, nothing polls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opsuite_common.kube import KubeApi, resource_path
from opsuite_common.metrics_auth import TtlCache, UserInfo

ALLOW_TTL = 10.0
"""Seconds an allowing review is reused: how long a revoked requester may still be acted for."""
DENY_TTL = 10.0
"""Seconds a denying review is reused."""
PARALLEL = 4
"""Reviews in flight at most."""
REQUESTER_NOT_ALLOWED = "RequesterNotAllowed"
"""The condition reason of an object whose requester may not (or is not recorded)."""


def requested_by(group: str) -> str:
    """The annotation naming the requester of an object of API group ``group``."""
    return f"{group}/requested-by"


def requested_by_groups(group: str) -> str:
    """The annotation listing the requester's groups, one per line."""
    return f"{group}/requested-by-groups"


@dataclass(frozen=True)
class Access:
    """One request the operator makes for the requester, as a SubjectAccessReview asks it."""

    namespace: str
    verb: str
    resource: str
    subresource: str = ""
    group: str = ""
    name: str = ""

    def __str__(self) -> str:
        what = "/".join(p for p in (self.resource, self.subresource) if p)
        if self.group:
            what = f"{what}.{self.group}"
        if self.name:
            what = f"{what} {self.name}"
        return f"{self.verb} {what} in {self.namespace}"


def requester(obj: Mapping[str, Any], group: str) -> UserInfo | None:
    """The user ``obj``'s annotations name, or None when none is recorded."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    username = annotations.get(requested_by(group))
    if not username:
        return None
    listed = str(annotations.get(requested_by_groups(group)) or "")
    return UserInfo(username=str(username), groups=tuple(g for g in listed.split("\n") if g))


class RequesterReviews:
    """SubjectAccessReviews of requesters, through the operator's session, cached."""

    def __init__(self, kube: KubeApi, cache: TtlCache | None = None) -> None:
        self._kube = kube.unfenced(PARALLEL)
        self._cache = cache or TtlCache()

    async def problem(
        self, obj: Mapping[str, Any], group: str, needs: Sequence[Access], *, required: bool
    ) -> str | None:
        """Why the operator may not act for ``obj``'s requester, who needs every one of
        ``needs``; None when it may (or, unless ``required``, when no requester is recorded:
        admission alone vouched)."""
        user = requester(obj, group)
        if user is None:
            if not required:
                return None
            return (
                f"no requester recorded (annotation {requested_by(group)}, set at admission by "
                "the requester policy): change the spec to record yourself, or install the "
                "requester policy"
            )
        missing = [str(access) for access in needs if not await self.allowed(user, access)]
        if not missing:
            return None
        return (
            f"its requester {user.username} may no longer {'; '.join(missing)}: nothing more "
            "is done for it until they may, or someone who may changes its spec"
        )

    async def allowed(self, user: UserInfo, access: Access) -> bool:
        """Whether ``user`` may make ``access`` (cached)."""
        key = (user, access)
        found, answer = self._cache.get(key)
        if found:
            return bool(answer)
        allowed = await self._review(user, access)
        self._cache.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        return allowed

    async def _review(self, user: UserInfo, access: Access) -> bool:
        attributes = {"namespace": access.namespace, "verb": access.verb}
        attributes.update(
            (k, v)
            for k, v in (
                ("group", access.group),
                ("resource", access.resource),
                ("subresource", access.subresource),
                ("name", access.name),
            )
            if v
        )
        spec: dict[str, object] = {"user": user.username, "resourceAttributes": attributes}
        if user.groups:
            spec["groups"] = list(user.groups)
        review = await self._kube.create(
            resource_path("authorization.k8s.io/v1", "subjectaccessreviews"),
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return (review.get("status") or {}).get("allowed") is True
