"""The one object through which kopf's replaced functions reach the operator's process: what they
report to and ask of it (the manager is one). No kopf here: the manager's modules import it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from opsuite_common.kopfwatch.activity import WatchActivity
from opsuite_common.protowatch import Decoder

Deliver = Callable[[Mapping[str, Any]], None]
"""Takes a raw watch event: ``{"type": ..., "object": ...}``, type None for a listing's."""


class WatchHooks(Protocol):
    """What the replaced kopf functions report to and ask of the operator's process, given to
    :func:`~opsuite_common.kopfwatch.install` once. Each is read when a watch (or a watch
    request) starts, never per event."""

    @property
    def activity(self) -> WatchActivity:
        """Told of each watch stream's listings and signs of life (:mod:`.streams`)."""
        ...

    def decoder(self, url: str) -> Decoder | None:
        """The protobuf decoder of a watch URL, None: JSON (:mod:`.streams`)."""
        ...

    def route(self, group: str, plural: str) -> Deliver | None:
        """The handler of a resource's raw watch events, None: kopf's own handling
        (:mod:`.routing`)."""
        ...
