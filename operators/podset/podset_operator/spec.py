"""The PodSet spec as the planner reads it: validated by the API models, selector resolved."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from opsuite_common.kube_model import LabelSelector, PodTemplateSpec
from podset_operator.models import NAME_LABEL, IntOrPercent, PodSetSpec, RollingUpdate


class InvalidSpecError(ValueError):
    """The PodSet spec cannot be acted upon; the message is user-facing."""


_PERCENT_RE = re.compile(r"([0-9]+)%")
_MAX_LABEL_VALUE = 63


@dataclass(frozen=True)
class ParsedSpec:
    """A validated PodSet spec and the selector it effectively uses."""

    name: str
    """The PodSet's name."""
    api: PodSetSpec
    """``spec`` as validated by the API model."""
    selector: LabelSelector
    """``spec.selector``, or ``{NAME_LABEL: name}`` when it is omitted."""

    @property
    def replicas(self) -> int:
        """Desired number of pods."""
        return self.api.replicas

    @property
    def template(self) -> PodTemplateSpec:
        """The pod template."""
        return self.api.template

    @property
    def min_ready_seconds(self) -> int:
        """Seconds a pod must be ready to count as available."""
        return self.api.min_ready_seconds

    @property
    def progress_deadline_seconds(self) -> int:
        """Seconds a rollout may make no progress before Progressing turns False."""
        return self.api.progress_deadline_seconds

    @property
    def default_selector(self) -> bool:
        """``spec.selector`` is omitted: pods are labelled and selected by NAME_LABEL."""
        return self.api.selector is None

    @property
    def rolling_update(self) -> bool:
        """``updateStrategy.type`` is RollingUpdate (else OnDelete)."""
        return self.api.update_strategy.type == "RollingUpdate"

    @property
    def revision_history_limit(self) -> int:
        """Old templates kept as ControllerRevisions."""
        return self.api.revision_history_limit

    @property
    def paused(self) -> bool:
        """``spec.paused``: template changes wait, scaling goes on."""
        return self.api.paused

    @property
    def rolls_out(self) -> bool:
        """Outdated pods are replaced: RollingUpdate and not paused."""
        return self.rolling_update and not self.paused

    @property
    def max_surge(self) -> IntOrPercent:
        """``updateStrategy.rollingUpdate.maxSurge`` (default 25%)."""
        return self._rolling().max_surge

    @property
    def max_unavailable(self) -> IntOrPercent:
        """``updateStrategy.rollingUpdate.maxUnavailable`` (default 25%)."""
        return self._rolling().max_unavailable

    def _rolling(self) -> RollingUpdate:
        return self.api.update_strategy.rolling_update or RollingUpdate()


def scaled_value(value: IntOrPercent, total: int, round_up: bool) -> int:
    """Resolve an int or "N%" against ``total`` (intstr.GetScaledValueFromIntOrPercent)."""
    if isinstance(value, int):
        return value
    match = _PERCENT_RE.fullmatch(value)
    if match is None:
        raise InvalidSpecError(f"{value!r} is neither an integer nor a percentage")
    numerator = int(match.group(1)) * total
    return -(-numerator // 100) if round_up else numerator // 100


def _error_path(loc: Sequence[int | str], raw: object, missing: bool) -> str:
    """``spec.a.b[0]`` for a pydantic error location, leaving out union member tags."""
    path, value = "spec", raw
    for index, part in enumerate(loc):
        if isinstance(value, Mapping) and isinstance(part, str):
            if part in value:
                path, value = f"{path}.{part}", value[part]
                continue
            if missing and index == len(loc) - 1:
                path += f".{part}"
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            path, value = f"{path}[{part}]", value[part]
            continue
        value = None  # a tag such as "int" in ("maxSurge", "int"): not part of the path
    return path


def _describe(error: ErrorDetails, raw: object) -> str:
    message = error["msg"].removeprefix("Value error, ")
    return f"{_error_path(error['loc'], raw, error['type'] == 'missing')}: {message}"


def validation_message(error: ValidationError, raw: object) -> str:
    """A short user-facing summary of a spec ValidationError: the first error per field."""
    messages: dict[str, str] = {}
    for detail in error.errors(include_url=False):
        text = _describe(detail, raw)
        messages.setdefault(text.partition(": ")[0], text)
    first, *others = messages.values()
    return first if not others else f"{first} (and {len(others)} more)"


def _check_int_or_percent(value: IntOrPercent, field: str) -> None:
    if (isinstance(value, int) and value < 0) or (
        isinstance(value, str) and _PERCENT_RE.fullmatch(value) is None
    ):
        raise InvalidSpecError(
            f"spec.updateStrategy.rollingUpdate.{field}: "
            "must be a non-negative integer or a percentage such as 25%"
        )


def _effective_selector(api: PodSetSpec, name: str) -> LabelSelector:
    if api.selector is None:
        if not name or len(name) > _MAX_LABEL_VALUE:
            raise InvalidSpecError(
                f"metadata.name: must be at most {_MAX_LABEL_VALUE} characters when "
                f"spec.selector is omitted (it becomes the {NAME_LABEL} label value)"
            )
        return LabelSelector(match_labels={NAME_LABEL: name})
    selector = api.selector
    if not selector.match_labels and not selector.match_expressions:
        raise InvalidSpecError(
            "spec.selector: an empty selector would match every pod in the namespace; "
            "omit it instead"
        )
    labels = (api.template.metadata.labels if api.template.metadata else None) or {}
    if not selector.matches(labels):
        raise InvalidSpecError("spec.selector: selector does not match template labels")
    return selector


def parse_spec(podset: Mapping[str, Any]) -> ParsedSpec:
    """Validate ``podset["spec"]`` against the API model; InvalidSpecError says what is wrong.

    Validation is strict (JSON types, as the API server's schema) and repeats, defensively,
    the CEL rules the planner relies on: a non-empty selector that matches the template's
    labels and well-formed maxSurge/maxUnavailable.
    """
    raw = podset.get("spec")
    if raw is None:
        raise InvalidSpecError("spec: Field required")
    try:
        api = PodSetSpec.model_validate(raw, strict=True)
    except ValidationError as error:
        raise InvalidSpecError(validation_message(error, raw)) from None
    rolling = api.update_strategy.rolling_update or RollingUpdate()
    _check_int_or_percent(rolling.max_surge, "maxSurge")
    _check_int_or_percent(rolling.max_unavailable, "maxUnavailable")
    name = str((podset.get("metadata") or {}).get("name") or "")
    return ParsedSpec(name=name, api=api, selector=_effective_selector(api, name))
