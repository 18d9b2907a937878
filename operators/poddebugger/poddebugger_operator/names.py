"""The names of a PodDebugger's containers, and which containers are its own.

The name is ``pdbg-<debugger name, shortened>-<hash of the debugger's full name><hash of the
container spec>`` (:func:`container_name`): whether a pod already has it is read from its
spec.ephemeralContainers, so restarts, resyncs and repeated events never add a second one, and
a new spec (image...) yields a new name. A debugger's containers are those whose name is
exactly its own name's form (:func:`owned_by`), never a prefix match: ``shell`` does not claim
the containers of ``shell-admin``, nor ``a-b`` those of ``a.b``. Names of the previous scheme
(``pdbg-<debugger name>-<spec hash>``) still count when they were the debugger's alone."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from functools import lru_cache

from opsuite_common.store import JSON
from poddebugger_operator.models import CONTAINER_PREFIX, PodDebuggerSpec
from poddebugger_operator.spec import container_body

HASH_LENGTH = 10
"""Hex digits of the container spec's hash, the end of every container name."""
NAME_HASH_LENGTH = 8
"""Hex digits of the debugger name's hash, just before the spec's."""
MAX_NAME = 63
LEGACY_STEM = MAX_NAME - len(CONTAINER_PREFIX) - 1 - HASH_LENGTH - 1
"""The previous scheme kept this much of the debugger's name (46 characters)."""


def _hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def spec_hash(spec: PodDebuggerSpec) -> str:
    """:data:`HASH_LENGTH` hex digits of the container the spec describes."""
    canonical = json.dumps(container_body(spec), sort_keys=True, separators=(",", ":"))
    return _hash(canonical, HASH_LENGTH)


def name_prefix(debugger_name: str) -> str:
    """``pdbg-<stem>-<hash of the debugger's name>``: every container name of one debugger is
    this followed by :data:`HASH_LENGTH` hex digits, nothing else.

    The stem is the name as a DNS label (dots as dashes), shortened to fit: readable, but
    ``a.b`` and ``a-b`` (or two long names alike in their first 39 characters) share it. The
    hash of the full name tells them apart.
    """
    room = MAX_NAME - len(CONTAINER_PREFIX) - 1 - NAME_HASH_LENGTH - HASH_LENGTH
    stem = re.sub(r"[^a-z0-9-]", "-", debugger_name.lower())[:room].strip("-") or "x"
    return f"{CONTAINER_PREFIX}{stem}-{_hash(debugger_name, NAME_HASH_LENGTH)}"


def container_name(debugger_name: str, spec: PodDebuggerSpec) -> str:
    """Deterministic ephemeral container name, a DNS label: ``pdbg-<stem>-`` then 18 hex
    digits, 8 of the debugger's name and 10 of the container spec (``pdbg-shell-``
    ``1a2b3c4d`` ``ee4f01367c``)."""
    return f"{name_prefix(debugger_name)}{spec_hash(spec)}"


def _legacy_prefix(debugger_name: str) -> str | None:
    """``pdbg-<debugger name>-``, the previous scheme's names of this debugger's containers
    (then followed by the spec hash), when that scheme kept the name as it is (no dot, at most
    46 characters): only then were those names the debugger's alone. (A name with dots had
    its dots made dashes, so ``a.b`` and ``a-b`` got the same names; a longer one was cut.)"""
    if "." in debugger_name or len(debugger_name) > LEGACY_STEM:
        return None
    return f"{CONTAINER_PREFIX}{debugger_name}-"


def legacy_container_name(debugger_name: str, spec: PodDebuggerSpec) -> str | None:
    """The name the previous scheme gave this spec's container (``pdbg-<name>-<spec hash>``),
    None when that name was not the debugger's alone (:func:`_legacy_prefix`)."""
    prefix = _legacy_prefix(debugger_name)
    return None if prefix is None else f"{prefix}{spec_hash(spec)}"


@lru_cache(maxsize=1024)
def owned_by(debugger_name: str) -> Callable[[str], bool]:
    """Whether a container name is one this debugger's containers have, of any spec.

    Exactly :func:`name_prefix` + 10 hex digits, or the previous scheme's
    ``pdbg-<debugger name>-`` + 10 hex digits (:func:`_legacy_prefix`). The two forms cannot
    be confused: a name of this scheme ends with 18 hex digits, one of the previous scheme
    with a dash and 10. Two debuggers' names of this scheme are the same only if their stems
    and 32-bit name hashes are.
    """
    forms = [re.escape(name_prefix(debugger_name))]
    legacy = _legacy_prefix(debugger_name)
    if legacy is not None:
        forms.append(re.escape(legacy))
    pattern = re.compile(f"(?:{'|'.join(forms)})[0-9a-f]{{{HASH_LENGTH}}}")
    return lambda container: pattern.fullmatch(container) is not None


def ephemeral_container(debugger_name: str, spec: PodDebuggerSpec) -> JSON:
    """The ephemeral container a pod gets from this debugger."""
    return {"name": container_name(debugger_name, spec), **container_body(spec)}
