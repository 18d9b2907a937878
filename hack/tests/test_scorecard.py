"""hack/scorecard.py's pieces that need no cluster: the config it runs and where its pods go."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import scorecard

from e2e.placement import REAL_NODE_LABEL
from opsuite_packaging.bundle import SCORECARD_IMAGE

ROOT = Path(__file__).resolve().parents[2]


def test_local_config_runs_the_bundles_tests_with_the_local_image() -> None:
    bundle = ROOT / "bundle" / "podset-operator"
    original = yaml.safe_load((bundle / "tests" / "scorecard" / "config.yaml").read_text())
    local = yaml.safe_load(scorecard.local_config(bundle, "ghcr.io/opsuite/scorecard-test:x"))
    tests, local_tests = original["stages"][0]["tests"], local["stages"][0]["tests"]
    assert {t["image"] for t in tests} == {SCORECARD_IMAGE}
    assert {t["image"] for t in local_tests} == {"ghcr.io/opsuite/scorecard-test:x"}
    assert [t["entrypoint"] for t in local_tests] == [t["entrypoint"] for t in tests]


def test_namespace_puts_its_pods_on_the_real_node() -> None:
    annotations = json.loads(scorecard.namespace_manifest("sc"))["metadata"]["annotations"]
    selector = annotations["scheduler.alpha.kubernetes.io/node-selector"]
    assert selector == f"{REAL_NODE_LABEL}=true"
    (toleration,) = json.loads(annotations["scheduler.alpha.kubernetes.io/defaultTolerations"])
    assert toleration == {
        "key": REAL_NODE_LABEL,
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
