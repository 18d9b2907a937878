"""One reconcile's injections and what the status reports of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from opsuite_common.store import JSON
from poddebugger_operator.models import DebuggedPod
from poddebugger_operator.pods import object_meta
from poddebugger_operator.refusals import Failure


@dataclass(frozen=True)
class Injection:
    """Add ``container`` to the pod ``pod`` (a cached record) through the subresource;
    ``attempt`` counts the refusals in a row before it, plus one; ``by`` names the PodDebugger
    and its requester in the Events about it (:mod:`poddebugger_operator.attribution`)."""

    pod: Mapping[str, Any]
    container: JSON
    attempt: int = 1
    by: str = ""
    copy: JSON | None = None
    """Mode Copy: create a copy of the pod with this metadata holding ``container``
    instead (:mod:`poddebugger_operator.copies`)."""

    @property
    def copy_name(self) -> str | None:
        return None if self.copy is None else str(self.copy["name"])

    @property
    def pod_name(self) -> str:
        return str(object_meta(self.pod)["name"])

    @property
    def pod_uid(self) -> str:
        return str(object_meta(self.pod).get("uid") or "")


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
    expired: str | None = None
    """Why nothing more is added: the active deadline has passed (the Ready message)."""

    def with_results(self, injected: Iterable[Injection], failed: Iterable[Failure]) -> Outcome:
        """The outcome once injections were carried out (some maybe refused)."""
        failures = list(failed)
        refused = {f.pod for f in failures}
        added = [
            DebuggedPod(
                pod=i.pod_name,
                container=self.container,
                copy_pod=i.copy_name,
                image=self.image,
                state="Unknown",
            )
            for i in injected
            if i.pod_name not in refused
        ]
        return replace(
            self,
            debugged=self.debugged - refused,
            failures=(*(f for f in self.failures if f.pod not in refused), *failures),
            containers=(*self.containers, *added),
        )
