"""The kopf release and the shape of its private functions that :mod:`opsuite_common.kopfwatch`
replaces or calls, checked at start-up so that a kopf upgrade fails loudly, not quietly."""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from kopf._cogs.clients import api, errors, fetching, watching
from kopf._core.reactor import queueing

KOPF_SERIES = "1.45"
"""The kopf release series whose internals the patches are written for (pyproject.toml pins
the same)."""


F = TypeVar("F", bound=Callable[..., Any])


def unwrapped(function: F) -> F:
    """kopf's own ``function``, whether or not opsuite's replacement is installed over it: an
    install reads what it wraps through here, so installing twice wraps kopf's once."""
    return getattr(function, "__wrapped__", function)


def wrapping(replacement: F, original: Callable[..., Any]) -> F:
    """``replacement``, marked as wrapping kopf's ``original`` (:func:`unwrapped` finds it)."""
    replacement.__wrapped__ = original  # type: ignore[attr-defined]
    return replacement


class KopfShapeError(RuntimeError):
    """The installed kopf is not the shape the patches in this module were written for."""


def _kopf_version() -> str:
    return importlib.metadata.version("kopf")


_PATCHED: tuple[tuple[str, Any, str, str, frozenset[str]], ...] = (
    ("kopf._cogs.clients.watching", watching, "infinite_watch", "an async generator function",
     frozenset({"settings", "resource", "namespace", "operator_paused"})),
    ("kopf._cogs.clients.watching", watching, "watch_objs", "an async generator function",
     frozenset({"settings", "resource", "namespace", "since", "operator_pause_waiter"})),
    ("kopf._cogs.clients.fetching", fetching, "fetch_objs", "an async generator function",
     frozenset({"settings", "resource", "namespace", "logger"})),
    ("kopf._cogs.clients.api", api, "stream", "an async generator function",
     frozenset({"url", "settings", "stopper"})),
    ("kopf._cogs.clients.errors", errors, "check_response", "a coroutine function",
     frozenset({"response"})),
    ("kopf._core.reactor.queueing", queueing, "watcher", "a coroutine function",
     frozenset({"namespace", "settings", "resource", "processor", "operator_paused",
                "operator_indexed", "resource_indexed"})),
)  # fmt: skip
"""(module, module object, function, kind, keyword parameters) of every kopf internal patched."""

_CALLED: tuple[tuple[str, Any, str, str, frozenset[str]], ...] = (
    ("kopf._cogs.clients.api", api, "request", "a coroutine function",
     frozenset({"method", "url", "payload", "headers", "timeout", "settings", "logger"})),
    ("kopf._cogs.clients.api", api, "iter_jsonlines", "an async generator function",
     frozenset({"content"})),
)  # fmt: skip
"""The same for the kopf internals the replacement of ``api.stream`` calls."""


def check_kopf_shape() -> None:
    """Fail loudly, at start-up, when kopf is not the version or shape the patches expect:
    the private functions they replace or call, their kind and parameters, and the listing
    bookmark."""
    problems = []
    version = _kopf_version()
    if version != KOPF_SERIES and not version.startswith(f"{KOPF_SERIES}."):
        problems.append(f"kopf {version} is installed; the patches are for {KOPF_SERIES}.x")
    for path, module, name, kind, params in _PATCHED + _CALLED:
        function = getattr(module, name, None)
        function = None if function is None else unwrapped(function)
        if function is None:
            problems.append(f"{path}.{name} is gone")
            continue
        is_kind = (
            inspect.isasyncgenfunction(function)
            if kind.endswith("async generator function")
            else inspect.iscoroutinefunction(function)
        )
        if not is_kind:
            problems.append(f"{path}.{name} is no longer {kind}")
        missing = params - set(inspect.signature(function).parameters)
        if missing:
            problems.append(f"{path}.{name} lost the parameters {', '.join(sorted(missing))}")
    if getattr(getattr(watching, "Bookmark", None), "LISTED", None) is None:
        problems.append("kopf._cogs.clients.watching.Bookmark.LISTED is gone")
    if problems:
        raise KopfShapeError("; ".join(problems))
