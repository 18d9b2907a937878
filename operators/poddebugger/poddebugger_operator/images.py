"""Image references compared as docker compares them, in Python and in CEL (one semantics).

:func:`normalise` turns a reference (or a prefix of one) into its fully qualified form, as
docker's reference parser does (distribution/reference ``ParseNormalizedNamed``):

* the first path component is a registry host when it contains ``.`` or ``:``, is
  ``localhost``, or has upper-case letters; otherwise the registry is ``docker.io``;
* ``index.docker.io`` is ``docker.io``;
* a Docker Hub repository without a namespace is in ``library/``.

So ``busybox``, ``docker.io/busybox``, ``index.docker.io/library/busybox`` and
``docker.io/library/busybox`` are the same repository. A registry alone is a prefix ending
with ``/`` (``registry.example.com/``): without it, ``registry.example.com`` is a Docker Hub
repository of that name, as docker reads it.

:func:`allowed` matches on a component boundary: a normalised prefix admits a normalised image
that equals it, or starts with it followed by ``/``, ``:`` or ``@``, or starts with it when the
prefix itself ends with one of those. The prefix ``busybox`` admits ``busybox:1.37``,
``busybox@sha256:...`` and ``docker.io/library/busybox``, never ``busybox.attacker.io/x`` nor
``busyboxes``.

Under an allowlist an image must name its registry (:func:`names_registry`): ``busybox:1.37``
is admitted by no prefix, ``docker.io/library/busybox:1.37`` is. Docker reads a short name as
Docker Hub's, but CRI-O resolves one through its ``registries.conf`` aliases and search
registries, so the same short name can run an image from a registry the allowlist never named.
:func:`cel_parts`, :func:`cel_joined`, :func:`cel_names_registry` and :func:`cel_allowed` are
the same functions for the admission policy; the e2e tests run both against one table of cases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DOCKER_HUB = "docker.io"
LEGACY_HUB = "index.docker.io"
OFFICIAL = "library/"
SEPARATORS = ("/", ":", "@")
EXAMPLES: tuple[tuple[str, str, bool], ...] = (
    ("docker.io/library/busybox", "busybox", True),
    ("docker.io/library/busybox:1.37", "busybox", True),
    ("docker.io/library/busybox:1", "busybox", True),
    ("index.docker.io/library/busybox", "busybox", True),
    ("docker.io/busybox@sha256:" + "0" * 64, "busybox", True),
    ("index.docker.io/busybox", "docker.io/library/busybox", True),
    ("docker.io/library/busybox", "index.docker.io/busybox", True),
    ("busybox", "busybox", False),
    ("busybox:1.37", "docker.io/library/busybox", False),
    ("busybox.attacker.io/x", "busybox", False),
    ("docker.io/library/busyboxes", "busybox", False),
    ("attacker.io/busybox", "busybox", False),
    ("docker.io/attacker/busybox", "busybox", False),
    ("docker.io/library/busybox:1.37", "busybox:", True),
    ("docker.io/library/busybox:1.37", "busybox:1", False),
    ("registry.example.com/debug/tools:1", "registry.example.com/debug/", True),
    ("registry.example.com/debugger:1", "registry.example.com/debug", False),
    ("registry.example.com/debug/tools", "registry.example.com/", True),
    ("registry.example.com.attacker.io/x", "registry.example.com/", False),
    ("localhost/x", "localhost/", True),
    ("localhost:5000/debug/x", "localhost:5000/debug", True),
    ("docker.io/library/alpine:3", "busybox", False),
    ("nicolaka/netshoot", "docker.io/nicolaka/", False),
    ("docker.io/nicolaka/netshoot:v1", "nicolaka/netshoot", True),
)
"""(image, prefix, admitted): the semantics by example, checked against :func:`allowed` by the
unit tests and against :func:`cel_allowed` on an API server by the e2e tests."""
_REGISTRY = re.compile(r"^([^/]*[.:A-Z][^/]*|localhost)/")
"""A first component that is a registry host (and the ``/`` after it)."""


def normalise(reference: str) -> str:
    """``reference`` fully qualified: ``registry/repository[:tag][@digest]``."""
    if _REGISTRY.match(reference):
        registry, _, rest = reference.partition("/")
    else:
        registry, rest = DOCKER_HUB, reference
    if registry == LEGACY_HUB:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and rest and "/" not in rest:
        rest = OFFICIAL + rest
    return f"{registry}/{rest}"


def matches(image: str, prefix: str) -> bool:
    """Whether normalised ``image`` starts with normalised ``prefix`` at a component boundary."""
    if not image.startswith(prefix):
        return False
    return (
        len(image) == len(prefix) or prefix.endswith(SEPARATORS) or image[len(prefix)] in SEPARATORS
    )


def names_registry(reference: str) -> bool:
    """Whether ``reference`` names its registry (its first component is a registry host)."""
    return _REGISTRY.match(reference) is not None


def allowed(image: str, prefixes: Sequence[str]) -> bool:
    """Whether ``image`` is admitted by one of ``prefixes`` (none: every image, short names
    included); under an allowlist only an image that names its registry."""
    if not prefixes:
        return True
    qualified = normalise(image)
    return names_registry(image) and any(matches(qualified, normalise(p)) for p in prefixes)


def cel_parts(ref: str) -> str:
    """A CEL expression for the [registry, rest] of the string expression ``ref``, the first
    step of :func:`normalise` (Kubernetes CEL has ``matches``, and ``indexOf`` and
    ``substring`` from the strings extension)."""
    has_registry = cel_names_registry(ref)
    ref = f"string({ref})"  # a parameter's fields are dyn: the list's items must be strings
    split = f"[{ref}.substring(0, {ref}.indexOf('/')), {ref}.substring({ref}.indexOf('/') + 1)]"
    return f"{has_registry} ? {split} : ['{DOCKER_HUB}', {ref}]"


def cel_names_registry(ref: str) -> str:
    """A CEL expression for :func:`names_registry` of the string expression ``ref``."""
    return f"string({ref}).matches('{_REGISTRY.pattern}')"


def cel_joined(parts: str) -> str:
    """A CEL expression for the rest of :func:`normalise`, from :func:`cel_parts` ``parts``."""
    hub = f"{parts}[0] in ['{DOCKER_HUB}', '{LEGACY_HUB}']"
    official = f"{hub} && {parts}[1] != '' && !{parts}[1].contains('/')"
    return (
        f"({hub} ? '{DOCKER_HUB}' : {parts}[0]) + '/' + "
        f"({official} ? '{OFFICIAL}' : '') + {parts}[1]"
    )


def cel_allowed(image: str, prefixes: str) -> str:
    """A CEL expression for :func:`allowed`: ``image`` a normalised image expression,
    ``prefixes`` a list expression of normalised prefixes (empty: every image)."""
    boundary = " || ".join(f"p.endsWith('{s}')" for s in SEPARATORS)
    after = f"{image}.substring(size(p), size(p) + 1)"
    return (
        f"size({prefixes}) == 0 || {prefixes}.exists(p, {image} == p || "
        f"({image}.startsWith(p) && ({boundary} || {after} in {list(SEPARATORS)!r})))"
    )
