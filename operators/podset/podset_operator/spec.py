"""The subset of the PodSet spec the planner reads, parsed from the raw custom resource."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from podset_operator.selector import InvalidSpecError, LabelSelector, parse_selector

IntOrPercent: TypeAlias = int | str
Strategy: TypeAlias = Literal["RollingUpdate", "OnDelete"]

DEFAULT_MAX_SURGE: IntOrPercent = "25%"
DEFAULT_MAX_UNAVAILABLE: IntOrPercent = "25%"

_PERCENT_RE = re.compile(r"([0-9]+)%")


@dataclass(frozen=True)
class PodSetSpec:
    """Validated desired state of one PodSet."""

    replicas: int
    selector: LabelSelector
    template: Mapping[str, Any]
    min_ready_seconds: int = 0
    strategy: Strategy = "RollingUpdate"
    max_surge: IntOrPercent = DEFAULT_MAX_SURGE
    max_unavailable: IntOrPercent = DEFAULT_MAX_UNAVAILABLE


def scaled_value(value: IntOrPercent, total: int, round_up: bool) -> int:
    """Resolve an int or "N%" against ``total`` (intstr.GetScaledValueFromIntOrPercent)."""
    if isinstance(value, int):
        return value
    match = _PERCENT_RE.fullmatch(value)
    if match is None:
        raise InvalidSpecError(f"{value!r} is neither an integer nor a percentage")
    numerator = int(match.group(1)) * total
    return -(-numerator // 100) if round_up else numerator // 100


def _non_negative_int(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidSpecError(f"spec.{key} must be a non-negative integer")
    return value


def _int_or_percent(raw: Mapping[str, Any], key: str, default: IntOrPercent) -> IntOrPercent:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidSpecError(f"rollingUpdate.{key} must be an integer or a percentage")
    if isinstance(value, int) and value < 0:
        raise InvalidSpecError(f"rollingUpdate.{key} must not be negative")
    scaled_value(value, 100, round_up=False)  # validates the percentage syntax
    return value


def _template_labels(template: Mapping[str, Any]) -> Mapping[str, str]:
    meta = template.get("metadata") or {}
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise InvalidSpecError("spec.template.metadata.labels must map strings to strings")
    return labels


def parse_spec(raw: object) -> PodSetSpec:
    """Validate and parse ``podset["spec"]``; raises InvalidSpecError with a user-facing reason."""
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("spec is required")
    template = raw.get("template")
    if not isinstance(template, Mapping):
        raise InvalidSpecError("spec.template is required")
    selector = parse_selector(raw.get("selector"))
    if not selector.matches(_template_labels(template)):
        raise InvalidSpecError("spec.selector does not match spec.template.metadata.labels")
    strategy_raw = raw.get("strategy") or {}
    if not isinstance(strategy_raw, Mapping):
        raise InvalidSpecError("spec.strategy must be an object")
    strategy = strategy_raw.get("type", "RollingUpdate")
    if strategy not in ("RollingUpdate", "OnDelete"):
        raise InvalidSpecError(f"spec.strategy.type {strategy!r} is not supported")
    rolling = strategy_raw.get("rollingUpdate") or {}
    if not isinstance(rolling, Mapping):
        raise InvalidSpecError("spec.strategy.rollingUpdate must be an object")
    return PodSetSpec(
        replicas=_non_negative_int(raw, "replicas", 1),
        selector=selector,
        template=template,
        min_ready_seconds=_non_negative_int(raw, "minReadySeconds", 0),
        strategy=strategy,
        max_surge=_int_or_percent(rolling, "maxSurge", DEFAULT_MAX_SURGE),
        max_unavailable=_int_or_percent(rolling, "maxUnavailable", DEFAULT_MAX_UNAVAILABLE),
    )
