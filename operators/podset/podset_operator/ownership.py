"""Adoption and release decisions (k8s PodControllerRefManager.ClaimPods semantics)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from opsuite_common.kube_model import LabelSelector
from podset_operator.pod_state import Pod, controller_ref, is_active, pod_labels


@dataclass(frozen=True)
class Claim:
    """Outcome of claiming the namespace's pods for one PodSet."""

    owned: tuple[Pod, ...]
    """Active pods already controlled by the PodSet and matching its selector."""
    adopt: tuple[Pod, ...]
    """Active orphans matching the selector; they join the PodSet once adopted."""
    release: tuple[Pod, ...]
    """Active pods controlled by the PodSet whose labels no longer match."""

    @property
    def managed(self) -> tuple[Pod, ...]:
        """The active pods the PodSet counts as its replicas."""
        return self.owned + self.adopt


def is_controlled_by(pod: Pod, owner_uid: str) -> bool:
    """The pod's controller ownerReference points at ``owner_uid``."""
    ref = controller_ref(pod)
    return ref is not None and ref.get("uid") == owner_uid


def claim_pods(
    pods: Iterable[Pod], owner_uid: str, selector: LabelSelector, owner_deleting: bool
) -> Claim:
    """Split ``pods`` into owned, to-adopt and to-release; pods of other controllers are ignored.

    Only active pods are claimed, like the ReplicaSet controller, and nothing is adopted or
    released while the owner is being deleted.
    """
    owned: list[Pod] = []
    adopt: list[Pod] = []
    release: list[Pod] = []
    for pod in pods:
        if not is_active(pod):
            continue
        matches = selector.matches(pod_labels(pod))
        ref = controller_ref(pod)
        if ref is not None and ref.get("uid") == owner_uid:
            if matches:
                owned.append(pod)
            elif not owner_deleting:
                release.append(pod)
        elif ref is None and matches and not owner_deleting:
            adopt.append(pod)
    return Claim(tuple(owned), tuple(adopt), tuple(release))
