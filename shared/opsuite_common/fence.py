"""The write fence: no write leaves a process that no longer leads (#16, item 9).

client-go offers no fencing; a controller-runtime manager that loses its Lease exits, and the
writes its goroutines had in flight go on until then. Here every write the operator sends
through :class:`~opsuite_common.kube.KubeApi` passes the fence right before it is sent, when its
turn among the requests in flight comes: while the fence is open it is counted in flight until
its response; once closed it is refused with :class:`WriteFenced` and never sent. So a write
waiting for its turn (or a PodDebugger injection sent without waiting) when leadership ends is
dropped, and after
:meth:`WriteFence.close` returns, the writes that can still reach the API server are exactly
those already in flight, which :meth:`WriteFence.drain` waits for before the Lease is released.
Those reach the API server within ``kube_transport.UNACKNOWLEDGED_TIMEOUT`` of being sent or
never: a connection whose bytes stay unacknowledged that long is dropped with them (#20).

The fence is also a deadline, not only a flag (#32, item 2): the elector sets it at every
renewal (:meth:`WriteFence.lead_until`), and past it a write is refused even though nothing
has closed the fence. The elector closes it at that deadline too, but only if it gets to run:
with the event loop blocked (an exec credential plugin run on it did, for seconds), the write
that blocked it and those queued behind would otherwise all leave before the elector noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Iterator

log = logging.getLogger(__name__)


class WriteFenced(Exception):
    """A write was refused, unsent, because this process does not lead (any more)."""


class WriteFence:
    """Open while this process leads; used on the event loop (by KubeApi and the elector)."""

    def __init__(self) -> None:
        self._open = False
        self._deadline = math.inf
        self._in_flight = 0
        self._refused = 0
        self._drained = asyncio.Event()
        self._drained.set()

    @property
    def is_open(self) -> bool:
        """Whether writes may leave: open, and its deadline not passed."""
        return self._open and asyncio.get_running_loop().time() < self._deadline

    @property
    def in_flight(self) -> int:
        """Writes sent and not answered yet."""
        return self._in_flight

    @property
    def refused(self) -> int:
        """Writes refused since the fence last closed."""
        return self._refused

    def open(self) -> None:
        """Let writes leave: this process leads."""
        self._open = True
        self._refused = 0

    def lead_until(self, deadline: float) -> None:
        """Refuse writes from ``deadline`` (event-loop time) on, open or not: the renew deadline
        of the last successful renewal, past which the lease may be lost."""
        self._deadline = deadline

    def close(self) -> None:
        """Refuse every write not sent yet: from now on this process does not lead."""
        if not self._open:
            return
        self._open = False
        log.info("write fence closed: no write leaves from now on (%d in flight)", self._in_flight)

    @contextlib.contextmanager
    def write(self, what: str) -> Iterator[None]:
        """Around sending one write: raise WriteFenced when closed or past the deadline, else
        count it in flight."""
        if not self.is_open:
            self._refused += 1
            raise WriteFenced(f"{what}: refused, this process does not lead")
        self._in_flight += 1
        self._drained.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()

    async def drain(self, max_wait: float) -> bool:
        """Wait up to ``max_wait`` s for the writes in flight to be answered; whether they were."""
        drained = True
        try:
            async with asyncio.timeout(max_wait):
                await self._drained.wait()
        except TimeoutError:
            drained = False
        if drained:
            log.info("writes drained (%d refused unsent)", self._refused)
        else:
            log.warning(
                "%d writes still in flight after %.1f s (%d refused unsent)",
                self._in_flight,
                max_wait,
                self._refused,
            )
        return drained
