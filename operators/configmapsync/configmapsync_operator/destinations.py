"""Where a ConfigMapSync's copies go (pure): the destinations listed or selected, and consent
in both directions.

A destination is listed (``destinationNamespaces``) or selected (``namespaceSelector``), and not
excluded (``excludeNamespaces``, names or patterns: exclusion wins); a selector never selects a
protected namespace (``kube-*``, ``openshift-*``, the operator's own: only listed ones get copies).
It is written only when it is not the source's namespace, the operator watches it, it exists and is
not being deleted (a listed one that is not gets an :class:`~configmapsync_operator.status.Issue`
saying why; a selected one is left out). Then consent, both ways
(:mod:`configmapsync_operator.consent`): the source's ``sync.opsuite.dev/allowed-namespaces`` must
allow the destination (NotAllowedBySource) and the destination Namespace's
``sync.opsuite.dev/accept-from`` must accept the source's namespace (NotAcceptedByNamespace). A
destination refused either way gets nothing written; when the annotation is missing altogether (say,
before the upgrade that introduced it) the copy there is kept as it is, else the planner deletes it.
:func:`wants` asks whether one Namespace is a destination that accepts the source's namespace, for
the events that map a Namespace to the ConfigMapSyncs copying into it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from configmapsync_operator.consent import (
    accepted_sources,
    accepts,
    allowed_namespaces,
    matches,
    protected,
)
from configmapsync_operator.copies import is_terminating
from configmapsync_operator.kinds import CONFIGMAPS, SyncKind
from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    SyncSpec,
)
from configmapsync_operator.spec import InvalidSpecError, parse_spec
from configmapsync_operator.status import (
    NAMESPACE_MISSING,
    NAMESPACE_NOT_WATCHED,
    NOT_ACCEPTED_BY_NAMESPACE,
    NOT_ALLOWED_BY_SOURCE,
    SOURCE_NAMESPACE,
    Issue,
)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _excluded(spec: SyncSpec, ns: str) -> bool:
    return matches(spec.exclude_namespaces or (), ns)


def _selects(spec: SyncSpec, record: Mapping[str, Any], own: str | None) -> bool:
    """Whether the selector selects the Namespace ``record``: never a protected one, which
    gets copies only when listed (``{}`` must not reach ``kube-system``)."""
    selector = spec.namespace_selector
    name = str((record.get("metadata") or {}).get("name"))
    return selector is not None and not protected(name, own) and selector.matches(_labels(record))


def _targets(
    spec: SyncSpec,
    source_namespace: str,
    namespaces: Mapping[str, Mapping[str, Any]],
    served: Collection[str],
    own: str | None,
) -> tuple[list[str], list[Issue]]:
    """Writable destination namespaces, and issues for listed ones that are not writable
    (excluded ones are no destination at all)."""
    writable: set[str] = set()
    issues: list[Issue] = []
    for ns in sorted(set(spec.destination_namespaces or ())):
        record = namespaces.get(ns)
        if _excluded(spec, ns):
            continue
        if ns == source_namespace:
            issues.append(
                Issue(ns, SOURCE_NAMESPACE, "the source namespace is never a destination")
            )
        elif served and ns not in served:
            issues.append(
                Issue(ns, NAMESPACE_NOT_WATCHED, "the operator does not watch this namespace")
            )
        elif record is None:
            issues.append(
                Issue(
                    ns,
                    NAMESPACE_MISSING,
                    "the namespace does not exist; the copy is made when it appears",
                )
            )
        elif is_terminating(record):
            issues.append(Issue(ns, NAMESPACE_MISSING, "the namespace is being deleted"))
        else:
            writable.add(ns)
    for ns, record in namespaces.items():
        if (
            ns != source_namespace
            and not is_terminating(record)
            and (not served or ns in served)
            and not _excluded(spec, ns)
            and _selects(spec, record, own)
        ):
            writable.add(ns)
    return sorted(writable), issues


def _refused(
    source: Mapping[str, Any], reference: str, writable: Sequence[str]
) -> tuple[list[str], list[Issue]]:
    """The destinations the source's consent annotation does not allow, with their issues."""
    patterns = allowed_namespaces(source)
    refused = [ns for ns in writable if patterns is None or not matches(patterns, ns)]
    if patterns is None:
        message = (
            f"{reference} does not allow copies: it has no "
            f"{ALLOWED_NAMESPACES_ANNOTATION} annotation; an existing copy is kept, not updated"
        )
        return refused, [Issue(ns, NOT_ALLOWED_BY_SOURCE, message) for ns in refused]
    allowed = ",".join(patterns)
    return refused, [
        Issue(
            ns,
            NOT_ALLOWED_BY_SOURCE,
            f"{reference} does not allow copies in namespace {ns} "
            f"({ALLOWED_NAMESPACES_ANNOTATION}: {allowed[:200]}); no copy is kept there",
        )
        for ns in refused
    ]


def _not_accepted(
    namespaces: Mapping[str, Mapping[str, Any]],
    source_namespace: str,
    writable: Sequence[str],
    own: str | None,
) -> tuple[list[str], list[Issue]]:
    """The destinations whose Namespace does not accept copies from ``source_namespace``."""
    refused: list[str] = []
    issues: list[Issue] = []
    for ns in writable:
        record = namespaces[ns]
        if accepts(record, source_namespace, own):
            continue
        refused.append(ns)
        patterns = accepted_sources(record)
        if patterns is None:
            message = (
                f"namespace {ns} accepts no copies: its Namespace has no {ACCEPT_FROM_ANNOTATION} "
                "annotation; an existing copy is kept, not updated"
            )
        elif protected(ns, own):
            message = (
                f"namespace {ns} is protected: it accepts copies only from the namespaces its "
                f"{ACCEPT_FROM_ANNOTATION} annotation names literally, not {source_namespace}; "
                "no copy is kept there"
            )
        else:
            message = (
                f"namespace {ns} does not accept copies from namespace {source_namespace} "
                f"({ACCEPT_FROM_ANNOTATION}: {','.join(patterns)[:200]}); no copy is kept there"
            )
        issues.append(Issue(ns, NOT_ACCEPTED_BY_NAMESPACE, message))
    return refused, issues


def consented(
    spec: SyncSpec,
    source: Mapping[str, Any] | None,
    reference: str,
    source_namespace: str,
    namespaces: Mapping[str, Mapping[str, Any]],
    served: Collection[str],
    own_namespace: str | None,
) -> tuple[list[str], list[str], list[Issue]]:
    """The destinations to write (consent given both ways), those whose copies stay as they
    are (no consent annotation at all: say, before the upgrade that introduced it), and the
    issues of the others. ``namespaces``: the Namespace records by name; ``reference``: the
    source's kind and namespace/name (``Secret team/tls``), for the messages."""
    writable, issues = _targets(spec, source_namespace, namespaces, served, own_namespace)
    kept: list[str] = []
    if source is not None:
        refused, not_allowed = _refused(source, reference, writable)
        issues.extend(not_allowed)
        writable = [ns for ns in writable if ns not in refused]
        if allowed_namespaces(source) is None:
            kept = refused  # no consent at all (say, before the upgrade): copies stay, frozen
    refused, not_accepted = _not_accepted(namespaces, source_namespace, writable, own_namespace)
    issues.extend(not_accepted)
    writable = [ns for ns in writable if ns not in refused]
    kept += [ns for ns in refused if accepted_sources(namespaces[ns]) is None]
    return writable, kept, issues


def wants(
    sync: Mapping[str, Any],
    namespace: Mapping[str, Any],
    own: str | None = None,
    kind: SyncKind = CONFIGMAPS,
) -> bool:
    """Whether ``sync`` (of ``kind``) names ``namespace`` (a record) as a destination, listed
    or selected and not excluded, that accepts copies from its source's namespace."""
    try:
        spec = parse_spec(sync, kind)
    except InvalidSpecError:
        return False
    name = str((namespace.get("metadata") or {}).get("name"))
    source_namespace = spec.source_namespace or sync["metadata"]["namespace"]
    if (
        name == source_namespace
        or _excluded(spec, name)
        or not accepts(namespace, source_namespace, own)
    ):
        return False
    return name in (spec.destination_namespaces or ()) or _selects(spec, namespace, own)
