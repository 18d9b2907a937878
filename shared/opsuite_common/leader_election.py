"""Lease-based leader election on asyncio, with client-go semantics.

A candidate acquires the coordination.k8s.io/v1 Lease when it is absent, has
no holder, is already ours, or has expired. Expiry is judged like client-go:
by the local monotonic time at which this elector last observed the lease
record change, plus the record's ``leaseDurationSeconds``; remote timestamps
are never compared with the local clock. Every write is optimistic: create
when absent, otherwise replace with the resourceVersion that was read, and a
409 only means "not this round".

The leader renews every ``retry_period``; failing to renew within
``renew_deadline`` of when the last successful renewal was *sent* ends
leadership (``LeadershipLost``), and so does observing another holder.
(client-go counts a round's renew deadline from its start, a retry period after
the last renewal was answered; but a standby counts the lease's expiry from
when the API server stored that renewal, which a late answer may follow by
seconds.) On cancellation the leading task is stopped first, then the lease is
released (controller-runtime's LeaderElectionReleaseOnCancel).

Fencing (beyond client-go, which relies on the process exiting): the moment
leadership ends, whatever the cause, the elector closes its ``Fence`` before
anything else, so no write leaves from then on; the renew deadline (shorter
than the lease duration) makes sure it knows before the lease can expire for
anyone else. Each successful renewal also gives the fence that deadline
(``Fence.lead_until``), which it keeps on its own: should the elector not run
in time (the event loop blocked), no write leaves past it either. Before
releasing the lease it waits, up to ``renew_deadline``, for the writes already
in flight to be answered, and releases it only if they were: otherwise the
lease is left to expire, later than that wait.

Beyond client-go: a standby does not poll. Between attempts it watches the Lease
(``LeaseApi.wait_for_change``) until the record changes or the observed lease
expires, so it sees each renewal as it happens (expiry is then measured from
the leader's real last renewal, not from a poll up to 4.4 s later), and it
takes over a released lease at once instead of at its next jittered retry.
Should the watch fail, it falls back to client-go's jittered retry period.

Decision: ``kubernetes.leaderelection`` (kubernetes 37) is not used. It does
ship a LeaseLock, but the elector is thread-based and blocking (``time.sleep``
loops, the leading callback in a daemon thread that keeps running after the
lease is lost), cannot be cancelled or release the lease on shutdown, never
increments ``leaseTransitions``, and calls ``sys.exit`` on a bad config.

The Lease calls go through a :class:`LeaseApi`; the operators' is
:class:`opsuite_common.lease_api.KubernetesLeaseApi`.

Length: one job, client-go's elector (acquire, renew within the deadline, observe, release,
step down); the parts share the Lease record and its timing.
"""

import asyncio
import logging
import os
import random
import socket
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's JitterFactor: bounds retry jitter and the renewDeadline check."""

Lease = dict[str, Any]
"""A Lease object as plain JSON: apiVersion, kind, metadata, spec."""


class LeaseConflictError(Exception):
    """The API server answered 409: the Lease changed or already exists."""


class LeadershipLost(Exception):
    """Leadership ended: renewal missed its deadline or another holder took over."""


class Fence(Protocol):
    """What the elector needs of a write fence (see opsuite_common.fence.WriteFence)."""

    def lead_until(self, deadline: float) -> None:
        """Let no write leave from ``deadline`` (event-loop time) on."""
        ...

    def close(self) -> None:
        """Let no write leave from now on."""
        ...

    async def drain(self, max_wait: float) -> bool:
        """Wait up to ``max_wait`` s for the writes in flight; whether they were answered."""
        ...


class LeaseApi(Protocol):
    """The Lease calls leader election needs."""

    async def wait_for_change(
        self, namespace: str, name: str, resource_version: str, max_wait: float
    ) -> None:
        """Return once the Lease differs from ``resource_version``, or after ``max_wait`` s."""
        ...

    async def get(self, namespace: str, name: str) -> Lease | None:
        """Return the Lease, or None when it does not exist."""
        ...

    async def create(self, namespace: str, lease: Lease) -> Lease:
        """Create the Lease; raise LeaseConflictError if it exists."""
        ...

    async def replace(self, namespace: str, name: str, lease: Lease) -> Lease:
        """Replace the Lease; raise LeaseConflictError on a stale resourceVersion."""
        ...


def default_identity() -> str:
    """Return POD_NAME (downward API), else ``<hostname>_<uuid4>`` like controller-runtime."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Lease coordinates and timings; defaults are client-go's core defaults."""

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: int = 15
    """Whole seconds, as stored in ``spec.leaseDurationSeconds``."""
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renew_deadline must be greater than retry_period*JitterFactor")
        if self.lease_duration < 1:
            raise ValueError("lease_duration must be at least one second")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be greater than zero")
        if not self.identity:
            raise ValueError("identity must not be empty")


def micro_time(moment: datetime) -> str:
    """Format a timezone-aware datetime as a Kubernetes MicroTime (RFC 3339, 6 digits, Z)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Campaigns for one Lease and runs a coroutine while it holds it."""

    def __init__(
        self,
        lease_api: LeaseApi,
        config: LeaderElectionConfig,
        *,
        on_leading_change: Callable[[bool], None] | None = None,
        fence: Fence | None = None,
        now: Callable[[], datetime] = _utcnow,
        rng: random.Random | None = None,
    ) -> None:
        """Build an elector.

        ``fence`` is closed the moment leadership ends and drained before the lease is
        released (see the module docstring); the leading coroutine opens it.

        ``on_leading_change`` is called with False at once and then on every
        change of ``is_leader`` (e.g. ``metrics.leader_status_hook``). ``now``
        stamps acquireTime/renewTime; ``rng`` drives the retry jitter.
        """
        self._api = lease_api
        self._config = config
        self._on_leading_change = on_leading_change
        self._fence = fence
        self._now = now
        self._rng = rng or random.Random()
        self._desc = f"{config.namespace}/{config.name}"
        self._lease: Lease | None = None  # last Lease read or written: our resourceVersion
        self._observed: dict[str, Any] = {}  # last observed spec
        self._observed_at = float("-inf")  # loop time when it was observed
        self._renew_by = float("-inf")  # loop time: renew_deadline after our last write was sent
        self._leading = False
        if on_leading_change is not None:
            on_leading_change(False)

    @property
    def identity(self) -> str:
        """This candidate's holderIdentity."""
        return self._config.identity

    @property
    def is_leader(self) -> bool:
        """True from acquiring the lease until leadership is lost or released."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder in the last observed lease record ("" if none)."""
        return str(self._observed.get("holderIdentity") or "")

    async def run(self, on_started_leading: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Wait for the lease, then run ``on_started_leading`` while renewing it.

        Raises LeadershipLost (after cancelling and awaiting the leading task)
        when leadership ends; the caller should exit the process. On
        cancellation the leading task is cancelled and awaited, then the lease
        is released. If the leading coroutine finishes, the lease is released
        and its result or exception is propagated.
        """
        try:
            await self._acquire()
        except asyncio.CancelledError:
            # A write cancelled in flight may still have made us the holder.
            await self._release_if_held()
            raise
        leading = asyncio.create_task(on_started_leading(), name=f"leading {self._desc}")
        renewing = asyncio.create_task(self._renew(), name=f"renewing {self._desc}")
        try:
            await asyncio.wait((leading, renewing), return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Leadership ends now (lost, given up or stopped): before anything else, no write
            # may leave any more.
            if self._fence is not None:
                self._fence.close()
            leading.cancel()
            renewing.cancel()
            await asyncio.wait((leading, renewing))
            releasing = _failure(renewing) is None and self._config.release_on_cancel
            if releasing and await self._drained():
                await self._release()
            self._set_leading(False)
        lost = _failure(renewing)
        if lost is not None:
            raise lost from _failure(leading)
        await leading

    async def _drained(self) -> bool:
        """Whether the writes in flight were answered within renew_deadline; the lease, renewed
        at most retry_period ago, outlasts that wait."""
        if self._fence is None or await self._fence.drain(self._config.renew_deadline):
            return True
        log.warning("not releasing lease %s: writes still in flight; it will expire", self._desc)
        return False

    async def _acquire(self) -> None:
        log.info("attempting to acquire leader lease %s...", self._desc)
        while not await self._try_acquire_or_renew():
            await self._wait_for_opportunity()
        self._set_leading(True)
        log.info("successfully acquired lease %s as %s", self._desc, self.identity)

    async def _wait_for_opportunity(self) -> None:
        """Sleep until the Lease changes or its observed expiry; retry period on errors."""
        period = self._config.retry_period
        jittered = period + self._rng.random() * JITTER_FACTOR * period
        version = str(((self._lease or {}).get("metadata") or {}).get("resourceVersion") or "")
        if not version:
            await asyncio.sleep(jittered)
            return
        duration = int(self._observed.get("leaseDurationSeconds") or 0)
        until_expiry = self._observed_at + duration - asyncio.get_running_loop().time()
        started = asyncio.get_running_loop().time()
        try:
            await self._api.wait_for_change(
                self._config.namespace, self._config.name, version, max(until_expiry, 0.0) + 0.01
            )
        except Exception:
            log.debug("watching lease %s failed; retrying after %.1fs", self._desc, jittered)
            waited = asyncio.get_running_loop().time() - started
            await asyncio.sleep(max(jittered - waited, 0.0))

    async def _renew(self) -> None:
        config = self._config
        while True:
            await asyncio.sleep(config.retry_period)
            try:
                async with asyncio.timeout_at(self._renew_by):
                    while not await self._try_acquire_or_renew():
                        if self.leader != self.identity:
                            raise LeadershipLost(f"lease {self._desc} taken by {self.leader!r}")
                        await asyncio.sleep(config.retry_period)
            except TimeoutError:
                raise LeadershipLost(
                    f"failed to renew lease {self._desc} within {config.renew_deadline}s "
                    "of sending the last renewal"
                ) from None

    async def _try_acquire_or_renew(self) -> bool:
        try:
            return await self._acquire_or_renew()
        except LeaseConflictError:
            log.debug("conflict writing lease %s; will retry", self._desc)
        except Exception:
            log.warning("error acquiring or renewing lease %s", self._desc, exc_info=True)
        return False

    async def _acquire_or_renew(self) -> bool:
        stamp = micro_time(self._now())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._config.lease_duration,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        }
        # Fast path: the leader writes over its own last write, no read needed.
        if self.leader == self.identity and self._lease_valid() and self._lease is not None:
            try:
                self._renewed(await self._write(spec | _tenure(self._observed)))
            except Exception as exc:
                log.info("fast-path renewal of %s failed (%s), reading it", self._desc, exc)
            else:
                return True

        lease = await self._api.get(self._config.namespace, self._config.name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._config.name, "namespace": self._config.namespace},
                "spec": spec,
            }
            sent = asyncio.get_running_loop().time()
            try:
                self._lease = await self._api.create(self._config.namespace, body)
            except LeaseConflictError:
                # Created by another candidate meanwhile: read it now rather than next round.
                lease = await self._api.get(self._config.namespace, self._config.name)
                if lease is None:
                    return False
            else:
                self._observe(spec)
                self._renewed(sent)
                return True

        self._lease = lease
        current = lease.get("spec") or {}
        if current != self._observed:
            self._observe(current)
        if self.leader and self.leader != self.identity and self._lease_valid():
            log.debug("lease %s is held by %s and has not expired", self._desc, self.leader)
            return False
        if self.leader == self.identity:
            spec |= _tenure(current)
        else:
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        self._renewed(await self._write(spec))
        return True

    def _renewed(self, sent: float) -> None:
        """A write sent at ``sent`` (loop time) made or kept us the holder: the renew deadline
        counts from then, for the elector and the fence alike."""
        self._renew_by = sent + self._config.renew_deadline
        if self._fence is not None:
            self._fence.lead_until(self._renew_by)

    async def _release_if_held(self) -> None:
        """Release the Lease if the server says we hold it (after an interrupted acquire)."""
        if not self._config.release_on_cancel:
            return
        try:
            lease = await self._api.get(self._config.namespace, self._config.name)
        except Exception:
            log.warning("could not check lease %s on shutdown", self._desc, exc_info=True)
            return
        if lease is not None and _holder(lease) == self.identity:
            self._lease = lease
            self._observe(lease.get("spec") or {})
            await self._release()

    async def _release(self) -> None:
        if self.leader != self.identity or self._lease is None:
            return
        stamp = micro_time(self._now())
        spec = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": int(self._observed.get("leaseTransitions") or 0),
        }
        try:
            try:
                await self._write(spec)
            except LeaseConflictError:
                # A renewal interrupted by the cancel may have landed: re-read,
                # and release only if the lease is still ours.
                lease = await self._api.get(self._config.namespace, self._config.name)
                if lease is None or _holder(lease) != self.identity:
                    return
                self._lease = lease
                await self._write(spec)
        except Exception:
            log.warning("failed to release lease %s", self._desc, exc_info=True)
        else:
            log.info("released lease %s", self._desc)

    async def _write(self, spec: dict[str, Any]) -> float:
        """Replace the lease with ``spec`` under the resourceVersion last seen; the loop time
        it was sent."""
        assert self._lease is not None
        body = self._lease | {"spec": spec}
        sent = asyncio.get_running_loop().time()
        self._lease = await self._api.replace(self._config.namespace, self._config.name, body)
        self._observe(spec)
        return sent

    def _observe(self, spec: dict[str, Any]) -> None:
        previous = self.leader
        self._observed = dict(spec)
        self._observed_at = asyncio.get_running_loop().time()
        if self.leader and self.leader != previous:
            log.info("new leader for lease %s: %s", self._desc, self.leader)

    def _lease_valid(self) -> bool:
        duration = int(self._observed.get("leaseDurationSeconds") or 0)
        return self._observed_at + duration > asyncio.get_running_loop().time()

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if not leading:
            log.info("stopped leading lease %s", self._desc)
        if self._on_leading_change is not None:
            self._on_leading_change(leading)


def _holder(lease: Lease) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _tenure(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields a holder keeps across renewals."""
    return {
        "acquireTime": spec.get("acquireTime"),
        "leaseTransitions": int(spec.get("leaseTransitions") or 0),
    }


def _failure(task: asyncio.Task[None]) -> BaseException | None:
    return None if task.cancelled() else task.exception()
