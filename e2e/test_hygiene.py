"""Runs last (``after_suite``): nothing the suite's operators touched carries kopf's bookkeeping.

kopf's high-level handlers write a diff-base annotation, progress annotations and a finalizer
onto the objects they watch. opsuite watches other people's objects (pods, ConfigMaps,
namespaces) read-only, so after the whole suite none of them may carry any.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.cluster import Cluster

pytestmark = pytest.mark.after_suite

KOPF_MARK = "kopf.zalando.org"


def _kopf_marks(items: list[dict[str, Any]]) -> list[str]:
    found = []
    for obj in items:
        meta = obj.get("metadata", {})
        where = f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name')}"
        found += [
            f"{where}: annotation {a}" for a in meta.get("annotations") or {} if KOPF_MARK in a
        ]
        found += [f"{where}: finalizer {f}" for f in meta.get("finalizers") or [] if "kopf" in f]
    return found


def test_no_kopf_annotations_or_finalizers_anywhere(cluster: Cluster) -> None:
    marks: list[str] = []
    kinds = [
        "pods",
        "configmaps",
        "namespaces",
        "nodes",
        "services",
        "serviceaccounts",
        "leases.coordination.k8s.io",
    ]
    crds = json.loads(cluster.kubectl("get", "crd", "-o", "json"))["items"]
    kinds += [c["metadata"]["name"] for c in crds if c["spec"]["group"].endswith("opsuite.dev")]
    for kind in kinds:
        listing = json.loads(cluster.kubectl("get", kind, "--all-namespaces", "-o", "json"))
        items = listing["items"]
        assert isinstance(items, list)
        marks += _kopf_marks(items)
    assert not marks, "kopf bookkeeping found:\n" + "\n".join(marks)
