"""The Lease requests of leader election, sent through the operator's
:class:`~opsuite_common.kube.KubeApi`: the :class:`~opsuite_common.leader_election.LeaseApi` the
operators give the elector (its tests give it one of their own, so the elector holds no HTTP)."""

from __future__ import annotations

import asyncio
import math

from opsuite_common.kube import ApiException, KubeApi, resource_path
from opsuite_common.leader_election import Lease, LeaseConflictError


class KubernetesLeaseApi:
    """LeaseApi through the operator's :class:`~opsuite_common.kube.KubeApi` (its session, on
    the event loop), unfenced: the Lease is taken while the write fence is closed and released
    after it closed.

    Requests and responses are plain JSON rather than ``V1Lease`` models: the
    generated client re-serialises MicroTime with ``isoformat()``, which drops
    the fraction when microseconds are 0, and the API server rejects that.
    ``request_timeout`` should stay below renew_deadline so one hung request
    cannot cost leadership; controller-runtime uses max(1s, renewDeadline/2).
    """

    PARALLEL = 2
    """Lease requests in flight at most: a round's read and write, or a standby's watch; they
    never wait behind the operator's own requests."""

    def __init__(self, kube: KubeApi, *, request_timeout: float = 5.0):
        """Send through ``kube``'s session."""
        self._kube = kube.unfenced(self.PARALLEL, request_timeout=request_timeout)

    @staticmethod
    def _path(namespace: str, name: str | None = None) -> str:
        return resource_path("coordination.k8s.io/v1", "leases", namespace, name)

    async def get(self, namespace: str, name: str) -> Lease | None:
        """Return the Lease, or None when it does not exist."""
        return await self._kube.get(self._path(namespace, name))

    async def create(self, namespace: str, lease: Lease) -> Lease:
        """Create the Lease; raise LeaseConflictError if it exists."""
        return await self._write("POST", self._path(namespace), lease)

    async def replace(self, namespace: str, name: str, lease: Lease) -> Lease:
        """Replace the Lease; raise LeaseConflictError on a stale resourceVersion."""
        return await self._write("PUT", self._path(namespace, name), lease)

    async def _write(self, method: str, path: str, lease: Lease) -> Lease:
        try:
            return await self._kube.request(method, path, body=lease)
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseConflictError(f"{method} {path}: 409 Conflict") from exc
            raise

    async def wait_for_change(
        self, namespace: str, name: str, resource_version: str, max_wait: float
    ) -> None:
        """Watch the Lease from ``resource_version`` until its first event, or ``max_wait`` s."""
        query = {
            "fieldSelector": f"metadata.name={name}",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(max(1, math.ceil(max_wait))),
        }
        # The server ends the watch on whole seconds; the caller's deadline is exact.
        try:
            async with asyncio.timeout(max_wait) as deadline:
                await self._kube.wait_for_event(self._path(namespace), query, max_wait)
        except TimeoutError:
            if not deadline.expired():
                raise  # the request's own timeout: a failure, not the end of the wait
