"""Runs last (``after_suite``): the Argo CD health check shipped in docs/argocd/health.lua,
run as Argo CD runs it (its Lua interpreter, gopher-lua: ``.local/bin/argocd-health``, built by
``make tools``), gives each status the suite observed the health docs/argocd.md promises, and
the suite saw every operator's kind Progressing, Healthy and Degraded (and a PodSet Suspended)."""

from __future__ import annotations

import functools
import json
import subprocess

import pytest

from e2e.argocd_health import OBSERVED, expected
from e2e.cluster import ROOT
from opsuite_packaging.operators import OPERATORS

pytestmark = pytest.mark.after_suite

SCRIPT = ROOT / "docs" / "argocd" / "health.lua"
INTERPRETER = ROOT / ".local" / "bin" / "argocd-health"
HEALTHS = {"Progressing", "Healthy", "Degraded"}
SUSPENDABLE = {"podset": "Suspended"}
"""The kinds that can also be paused (a PodSet's spec.paused), and the health that shows it."""


def argocd_health(obj: dict[str, object]) -> dict[str, str]:
    """{status, message} as Argo CD computes them for ``obj`` with the shipped script."""
    done = subprocess.run(
        [str(INTERPRETER), str(SCRIPT)],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


def test_the_interpreter_reads_a_status_as_argo_cd_does() -> None:
    degraded = {"type": "Degraded", "status": "True", "message": "pods rejected"}
    status = {"observedGeneration": 2, "conditions": [degraded]}
    obj = {"metadata": {"generation": 2}, "status": status}
    assert argocd_health(obj) == {"status": "Degraded", "message": "pods rejected"}
    assert argocd_health({"metadata": {"generation": 1}})["status"] == "Progressing"


@functools.cache
def _healths(operator: str) -> dict[str, int]:
    """How many of the statuses the run observed of ``operator``'s kind got each health, each
    checked against the promised one (once for both tests: they run last, on the same run)."""
    observed = list(OBSERVED.get(operator, {}).values())
    if not observed:
        pytest.skip(f"this run read no {operator} object")
    seen: dict[str, int] = {}
    for obj in observed:
        health = argocd_health(obj)
        assert health["status"] == expected(obj), json.dumps(obj.get("status"), indent=1)
        seen[health["status"]] = seen.get(health["status"], 0) + 1
    return seen


@pytest.mark.parametrize("operator", [op.name for op in OPERATORS])
def test_each_observed_status_has_the_promised_health(operator: str) -> None:
    assert _healths(operator)


@pytest.mark.parametrize("operator", [op.name for op in OPERATORS])
def test_the_suite_saw_each_kind_in_each_health(operator: str) -> None:
    seen = _healths(operator)
    wanted = HEALTHS | ({SUSPENDABLE[operator]} if operator in SUSPENDABLE else set())
    assert set(seen) == wanted, f"{operator}: health seen {seen}"
