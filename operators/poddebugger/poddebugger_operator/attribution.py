"""Who debugged a pod: the words every Event about an injected container carries.

Each such Event (on the pod and on the PodDebugger) names the PodDebugger, as
``namespace/name``, and its requester, the user the requester policy recorded in the
``debug.opsuite.dev/requested-by`` annotation (:mod:`poddebugger_operator.requester`), so that
the namespace's Events answer "who debugged this pod". Only the user name is shown, never the
groups. The name is the annotation's: shortened and stripped of control characters, so that
a hand-written one cannot forge lines or fill the message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.requester import requester
from poddebugger_operator.models import GROUP, KIND

MAX_USER = 256
"""Longest requester name shown (a Kubernetes user name is rarely longer than 100)."""
UNRECORDED = "requester not recorded"


def _shown(user: str) -> str:
    printable = "".join(c if c.isprintable() else "?" for c in user[:MAX_USER])
    return printable + ("..." if len(user) > MAX_USER else "")


def attribution(debugger: Mapping[str, Any]) -> str:
    """``PodDebugger <namespace>/<name> (requested by <user>)``, or ``(requester not
    recorded)`` when the annotation is absent."""
    meta = debugger.get("metadata") or {}
    user = requester(debugger, GROUP)
    by = UNRECORDED if user is None else f"requested by {_shown(user.username)}"
    return f"{KIND} {meta.get('namespace')}/{meta.get('name')} ({by})"


def added(by: str, container: Mapping[str, Any], pod: str) -> str:
    """The message of ``DebugContainerAdded``, on the pod and on the PodDebugger."""
    return (
        f"{by} added ephemeral container {container['name']} (image {container['image']}) "
        f"to pod {pod}"
    )


def not_added(by: str, container: str, pod: str, why: str) -> str:
    """The message of ``DebugContainerRefused`` (on the pod) and ``InjectionFailed`` (on the
    PodDebugger)."""
    return f"{by} could not add ephemeral container {container} to pod {pod}: {why}"


def copied(by: str, container: Mapping[str, Any], pod: str, copy: Mapping[str, Any]) -> str:
    """The message of ``DebugCopyCreated`` (mode Copy), on the pod and on the PodDebugger."""
    return (
        f"{by} created pod {copy['name']}, a copy of pod {pod} with debug container "
        f"{container['name']} (image {container['image']})"
    )
