"""kopf's settings for opsuite's operators, each chosen deliberately: kopf as the watch layer only
(``on.event`` handlers feeding read-only caches), its peering, scanning, diff-base, posting
and process exit off, watch streams bounded and reconnected, initial lists streamed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

from opsuite_common.options import ManagerOptions

INACTIVITY_GRACE = 15.0
"""kopf reconnects a watch stream silent for the watch timeout plus this."""
CONNECT_TIMEOUT = 10.0
"""Seconds a watch (or any request) may take to connect."""


def watch_dead_after(watch_timeout: float) -> float:
    """Silence (s) after which a watch stream is dead: long enough for two of kopf's
    reconnects of a silent stream (each after ``watch_timeout + INACTIVITY_GRACE``, connected
    within ``CONNECT_TIMEOUT``) to have failed. 170 s for the default 60 s watch timeout."""
    return 2 * (watch_timeout + INACTIVITY_GRACE + CONNECT_TIMEOUT)


LIST_CHUNK_SIZE = 500
"""Objects per page of an initial LIST where streaming lists are not to be had (client-go's
reflector pages by 500 too): kopf lists in one request by default, and parsing a LIST of 20,000
pods whole raises the process's memory high-water mark, which its RSS keeps, to about twice
what the cache needs."""


def configure_kopf(settings: kopf.OperatorSettings, options: ManagerOptions) -> None:
    """Apply opsuite's kopf settings for one operator process."""
    # Leader election is ours (a coordination.k8s.io Lease, see leader_election.py); kopf's
    # peering (KopfPeering objects, freezing same-priority peers) is off.
    settings.peering.standalone = True
    settings.peering.mandatory = False
    # Resources are discovered once at start-up: no cluster-wide watch of CRDs or namespaces,
    # so no RBAC for them. The CRDs are installed before the operator (Helm crds/, OLM).
    settings.scanning.disabled = True
    # No diff-base: with only on.event handlers nothing compares old and new essences, yet kopf
    # builds one (a deep copy of the object) for every event, a sixth of a busy operator's CPU.
    # Progress would go to our own status, never to annotations.
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf")
    settings.persistence.finalizer = "opsuite.dev/kopf-unused"
    # No log-to-Event posting: it would also post about objects we merely watch. Operators
    # report through status conditions and metrics.
    settings.posting.enabled = False
    # Watch streams: bounded server-side, reconnected when silent, never hanging on connect.
    settings.watching.server_timeout = int(options.watch_timeout)
    settings.watching.client_timeout = int(options.watch_timeout) + 30
    settings.watching.inactivity_timeout = options.watch_timeout + INACTIVITY_GRACE
    settings.watching.connect_timeout = CONNECT_TIMEOUT
    # Initial lists streamed from the watch cache (see the module docstring): less CPU and an
    # earlier Ready with many objects present, as Go's reference (bench/README.md).
    settings.watching.initial_streaming = True
    settings.watching.chunk_size = LIST_CHUNK_SIZE
    # A list or watch answered 429 is sent again after its Retry-After, as client-go's rest
    # client does and KubeApi does, not after kopf's own backoff (1 s growing to 21 s) when that
    # is longer: a throttled start waits no longer than the API server asks.
    settings.networking.enforce_retry_after = True
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = CONNECT_TIMEOUT
    settings.queueing.exit_timeout = 2.0
    # kopf never kills the process: the manager owns its stop (the reconciles in hand, the
    # drain of the writes, the release of the Lease), bounded by the pod's grace period.
    settings.process.ultimate_exiting_timeout = None
    # Our handlers never block; keep kopf's thread pool for sync handlers small.
    settings.execution.max_workers = 2


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """A diff-base storage that keeps nothing, for operators without change-detecting handlers.

    kopf's ``on.create/update/resume`` handlers would see every object as new; opsuite uses
    ``on.event`` handlers only (see the module docstring).
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        """An empty essence: nothing is compared."""
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        """Nothing is stored, so nothing is fetched."""
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        """Store nothing."""
