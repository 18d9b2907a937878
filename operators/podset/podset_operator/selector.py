"""Kubernetes LabelSelector parsing and matching (metav1.LabelSelectorAsSelector semantics)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class InvalidSpecError(ValueError):
    """The PodSet spec cannot be acted upon; the message is user-facing."""


_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions entry."""

    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


@dataclass(frozen=True)
class LabelSelector:
    """A parsed, non-empty label selector."""

    match_labels: Mapping[str, str]
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every matchLabels entry and expression."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.requirements
        )


def _requirement(raw: object) -> Requirement:
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("selector.matchExpressions entries must be objects")
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise InvalidSpecError("selector.matchExpressions[].key must be a non-empty string")
    if operator not in _OPERATORS:
        raise InvalidSpecError(f"selector operator {operator!r} is not supported")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidSpecError("selector.matchExpressions[].values must be a list of strings")
    if operator in ("In", "NotIn") and not values:
        raise InvalidSpecError(f"selector operator {operator} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidSpecError(f"selector operator {operator} takes no values")
    return Requirement(key, str(operator), frozenset(values))


def parse_selector(raw: object) -> LabelSelector:
    """Parse ``spec.selector``; an absent or empty selector is rejected like ReplicaSet's."""
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("spec.selector is required")
    labels: Any = raw.get("matchLabels") or {}
    expressions: Any = raw.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise InvalidSpecError("selector.matchLabels must map strings to strings")
    if not isinstance(expressions, list):
        raise InvalidSpecError("selector.matchExpressions must be a list")
    if not labels and not expressions:
        raise InvalidSpecError("spec.selector must not be empty")
    return LabelSelector(dict(labels), tuple(_requirement(e) for e in expressions))
