"""Generated CRDs against the real API server: every valid model instance is accepted as is.

Hypothesis builds PodSet specs that satisfy the model (and its CEL rules); the API server must
accept each, prune nothing, and the stored spec must parse back to the same model.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from e2e.cluster import Cluster
from e2e.podset_support import GROUP, PLURAL, VERSION, install_crd
from opsuite_common.kube_model import LabelSelector, LabelSelectorRequirement, TemplateMetadata
from podset_operator.models import (
    MAX_INT32,
    PodSetSpec,
    PodSetTemplate,
    RollingUpdate,
    UpdateStrategy,
)

_names = st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_values = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?", fullmatch=True)
_int_or_percent = st.integers(0, 50) | st.integers(0, 100).map(lambda n: f"{n}%")


@st.composite
def _selector(draw: st.DrawFn, labels: dict[str, str]) -> LabelSelector | None:
    """None, or a selector the template's labels satisfy (the CRD's CEL rule)."""
    if not labels or draw(st.booleans()):
        return None
    keys = sorted(labels)
    chosen = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))
    match_labels = {k: labels[k] for k in chosen} if draw(st.booleans()) else None
    expressions = []
    for key in draw(st.lists(st.sampled_from(keys), max_size=2, unique=True)):
        operator = draw(st.sampled_from(["In", "Exists"]))
        values = [labels[key]] if operator == "In" else None
        expressions.append(LabelSelectorRequirement(key=key, operator=operator, values=values))
    absent = draw(_names.filter(lambda n: n not in labels))
    expressions.append(LabelSelectorRequirement(key=absent, operator="DoesNotExist"))
    return LabelSelector(match_labels=match_labels, match_expressions=expressions)


@st.composite
def podset_specs(draw: st.DrawFn) -> PodSetSpec:
    """Valid PodSet specs, CEL rules included."""
    labels = draw(st.dictionaries(_names, _values, max_size=4))
    rolling = draw(
        st.none()
        | st.builds(RollingUpdate, max_surge=_int_or_percent, max_unavailable=_int_or_percent)
    )
    strategy = (
        UpdateStrategy(type="RollingUpdate", rolling_update=rolling)
        if rolling is not None or draw(st.booleans())
        else UpdateStrategy(type="OnDelete")
    )
    containers = [{"name": "main", "image": draw(st.sampled_from(["busybox", "nginx:1.27"]))}]
    pod_spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        pod_spec["restartPolicy"] = "Always"  # the one value the CEL rule admits
    min_ready = draw(st.integers(0, 86_400))
    return PodSetSpec(
        replicas=draw(st.integers(0, 100_000)),
        selector=draw(_selector(labels)),
        template=PodSetTemplate(
            metadata=TemplateMetadata(labels=labels or None),
            spec=pod_spec,
        ),
        min_ready_seconds=min_ready,
        update_strategy=strategy,
        progress_deadline_seconds=draw(st.integers(min_ready + 1, MAX_INT32)),
    )


def _contains(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has everything ``expected`` has (it may have defaults on top)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(v, actual[k]) for k, v in expected.items()
        )
    return bool(expected == actual)


def _roundtrip(custom: client.CustomObjectsApi, namespace: str, spec: PodSetSpec) -> None:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodSet",
        "metadata": {"name": f"rt-{uuid.uuid4().hex[:10]}"},
        "spec": spec.to_kube(),
    }
    stored = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert _contains(spec.to_kube(), stored["spec"]), stored["spec"]  # nothing pruned
    assert PodSetSpec.model_validate(stored["spec"]) == spec  # defaults agree with pydantic's
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body["metadata"]["name"]
    )


def test_valid_podset_specs_are_accepted_unchanged(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    install_crd(cluster)
    custom = client.CustomObjectsApi(api)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(podset_specs())
    def check(spec: PodSetSpec) -> None:
        _roundtrip(custom, namespace, spec)

    check()
