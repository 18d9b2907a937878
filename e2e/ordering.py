"""Which e2e tests run last: those that judge the whole run (the audit log of every request the
operators made, what they left on other people's objects) are marked ``after_suite`` and moved
behind every other selected test, so that no file name has to sort last."""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Protocol, TypeVar

AFTER_SUITE = "after_suite"


class Marked(Protocol):
    def get_closest_marker(self, name: str) -> object | None: ...


Item = TypeVar("Item", bound=Marked)


def after_suite_last(items: MutableSequence[Item]) -> None:
    """Move the items marked ``after_suite`` to the end, keeping both groups' order."""
    items[:] = sorted(items, key=lambda item: item.get_closest_marker(AFTER_SUITE) is not None)
