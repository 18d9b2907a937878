"""The bad-input corpus (e2e/invalid_inputs.py) against the real API server.

Each object is sent as a server-side dry-run create with ``fieldValidation=Strict``, so the
whole validation chain runs (schema, CEL, strict decoding) and nothing is stored. Every invalid
case must be refused with 422 (400 for strict decoding) and its expected message; each kind's
valid base object must be accepted, so that a case fails only because of its own change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e import configmapsync_support, poddebugger_support, podset_support
from e2e.cluster import Cluster
from e2e.invalid_inputs import API, BASES, CASES, Case, merged


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    for support in (podset_support, configmapsync_support, poddebugger_support):
        support.install_crd(cluster)


NAMESPACE = "default"
"""Dry runs store nothing, so every case can use the namespace every cluster has."""


def _create(api: client.ApiClient, body: dict[str, Any]) -> None:
    group, version, plural = API[body["kind"]]
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, NAMESPACE, plural, body, dry_run="All", field_validation="Strict"
    )


@pytest.mark.parametrize("kind", sorted(BASES))
def test_valid_base_objects_are_accepted(crds: None, api: client.ApiClient, kind: str) -> None:
    _create(api, BASES[kind])


def test_corpus_has_thirty_cases_per_kind() -> None:
    for kind in BASES:
        assert sum(c.kind == kind for c in CASES) >= 30, kind
    assert len({(c.kind, c.id) for c in CASES}) == len(CASES), "duplicate case ids"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}: {c.id}" for c in CASES])
def test_invalid_object_is_rejected(crds: None, api: client.ApiClient, case: Case) -> None:
    with pytest.raises(ApiException) as rejected:
        _create(api, merged(BASES[case.kind], case.change))
    status = rejected.value.status
    assert status in (400, 422), f"{case.why}: {status} {rejected.value.body}"
    message = json.loads(rejected.value.body)["message"]
    assert case.message in message, f"{case.why}: expected {case.message!r} in {message}"
