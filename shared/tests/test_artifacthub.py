"""Artifact Hub annotations of the charts, read the way Artifact Hub's Helm tracker reads them."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml

import podset_manifests as podset
from opsuite_packaging.artifacthub import (
    CHANGES,
    PREFIX,
    chart_annotations,
    prerelease,
    repository_metadata,
)
from opsuite_packaging.chart import MAINTAINERS, chart_yaml
from opsuite_packaging.crd import build_crd
from opsuite_packaging.operators import OPERATORS

MODULES = {
    m.CHART_SPEC.name: m for m in (importlib.import_module(op.manifests) for op in OPERATORS)
}
CAPABILITIES = {
    "basic install",
    "seamless upgrades",
    "full lifecycle",
    "deep insights",
    "auto pilot",
}
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}
VERSION = next(iter(CHANGES))


def _annotations(name: str, version: str = VERSION) -> dict[str, str]:
    module = MODULES[name]
    crds = [build_crd(d) for d in (module.CRD, *getattr(module, "EXTRA_CRDS", ()))]
    return chart_annotations(module.CHART_SPEC, version, crds, module.SAMPLES)


def _list(annotations: dict[str, str], key: str) -> list[Any]:
    value = yaml.safe_load(annotations[PREFIX + key])
    assert isinstance(value, list), key
    assert value, key
    return value


@pytest.mark.parametrize("name", sorted(MODULES))
def test_annotations_are_what_artifact_hub_accepts(name: str) -> None:
    annotations = _annotations(name)
    assert annotations[PREFIX + "operator"] == "true"
    assert annotations[PREFIX + "operatorCapabilities"].lower() in CAPABILITIES
    assert annotations[PREFIX + "prerelease"] in ("true", "false")
    assert annotations[PREFIX + "license"] == "Apache-2.0"
    for link in _list(annotations, "links"):
        assert set(link) == {"name", "url"}
        assert link["url"].startswith("https://")
    for change in _list(annotations, "changes"):
        assert change["kind"] in CHANGE_KINDS
        assert change["description"]
    for image in _list(annotations, "images"):
        assert not image["image"].endswith(":latest")  # Artifact Hub skips scanning those
        assert image["image"] == f"ghcr.io/opsuite/{name}:{VERSION}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_crds_and_examples_are_the_charts(name: str) -> None:
    annotations = _annotations(name)
    crds = _list(annotations, "crds")
    module = MODULES[name]
    assert crds[0]["name"] == module.CHART_SPEC.crd_name
    for crd in crds:
        assert set(crd) == {"kind", "version", "name", "displayName", "description"}
        assert crd["description"]
    kinds = {crd["kind"] for crd in crds}
    examples = _list(annotations, "crdsExamples")
    assert {example["kind"] for example in examples} <= kinds
    assert module.CRD.kind in {example["kind"] for example in examples}


def test_no_sign_key_annotation() -> None:
    """signKey names a PGP key for Helm provenance files (its url is required); the charts are
    signed with keyless cosign, which Artifact Hub detects on the OCI chart by itself."""
    assert not any(key.endswith("signKey") for key in _annotations("podset-operator"))


def test_a_version_without_changes_is_refused() -> None:
    with pytest.raises(ValueError, match="changes"):
        _annotations("podset-operator", "99.0.0")


@pytest.mark.parametrize(
    ("version", "expected"), [("0.1.0", False), ("1.2.0-rc.1", True), ("1.0.0+build.1", False)]
)
def test_prerelease_is_a_semver_pre_release(version: str, expected: bool) -> None:
    assert prerelease(version) is expected


def test_chart_yaml_carries_the_annotations_verbatim() -> None:
    annotations = _annotations("podset-operator")
    chart = yaml.safe_load(chart_yaml(podset.CHART_SPEC, VERSION, annotations))
    assert chart["annotations"] == annotations


def test_repository_metadata_names_the_maintainers_as_owners() -> None:
    assert yaml.safe_load(repository_metadata()) == {"owners": [dict(m) for m in MAINTAINERS]}
