"""The kube-score gate of ``make lint`` (hack/kube_score.py): the charts pass it with their
waivers, each waiver names a check kube-score has and still reports, and the gate fails on a
finding nobody waived (a Deployment that lost its readiness probe) and on a stale waiver."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import kube_score
from helm_render import helm_template

from opsuite_packaging.bundle import rendered_objects

CHART = "podset-operator"


def test_the_charts_pass_with_their_waivers_and_every_waiver_is_known_and_used() -> None:
    waivers = kube_score.load_waivers()
    known = kube_score.known_checks()
    findings = kube_score.chart_findings(kube_score.charts())
    assert {w.check for w in waivers} <= known
    assert kube_score.problems(findings, waivers, known) == []
    for waiver in waivers:
        assert any(f.waived_by(waiver) for f in findings), waiver


def test_a_deployment_without_a_readiness_probe_is_a_finding_the_gate_reports() -> None:
    objects = list(rendered_objects(helm_template(CHART)))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    del deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    findings = kube_score.score(yaml.safe_dump_all(objects), "probe-less")
    (probe,) = [f for f in findings if f.check == "pod-probes"]
    assert probe.grade == "CRITICAL"
    assert "readiness" in probe.summary.lower()
    problems = kube_score.problems(findings, kube_score.load_waivers(), kube_score.known_checks())
    assert problems == [str(probe)]


def test_a_pod_without_a_seccomp_profile_is_a_finding() -> None:
    """An optional check the charts keep on (kube_score.OPTIONAL_CHECKS)."""
    manifests = helm_template(CHART, "podSecurityContext.seccompProfile=null")
    found = {f.summary for f in kube_score.score(manifests, CHART)}
    assert {"operator: The container has not configured Seccomp"} <= found


def test_an_unknown_or_stale_waiver_fails() -> None:
    findings = kube_score.score(helm_template(CHART), CHART)
    waivers = [
        *kube_score.load_waivers(),
        kube_score.Waiver(check="no-such-check", reason="typo"),
        kube_score.Waiver(check="pod-probes", reason="the probes are fine now"),
    ]
    assert kube_score.problems(findings, waivers, kube_score.known_checks()) == [
        "waiver no-such-check: kube-score has no such check",
        "waiver pod-probes: no finding needs it any more; remove it",
    ]


def test_main_fails_listing_a_finding_once_its_waiver_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    waivers = yaml.safe_load(kube_score.WAIVERS.read_text())
    waivers["waivers"] = [w for w in waivers["waivers"] if w["check"] != "deployment-replicas"]
    path = tmp_path / "waivers.yaml"
    path.write_text(yaml.safe_dump(waivers))
    monkeypatch.setattr(kube_score, "WAIVERS", path)
    assert kube_score.main() == 1
    out = capsys.readouterr().out
    for chart in kube_score.charts():
        line = f"{chart} (defaults) Deployment ns/r-{chart}: [WARNING] deployment-replicas"
        assert line in out
    assert "(everything on)" not in out  # two replicas pass the check


def test_a_waiver_needs_a_reason_and_no_unknown_keys() -> None:
    with pytest.raises(ValueError, match="reason"):
        kube_score.WaiverFile.model_validate({"waivers": [{"check": "pod-probes"}]})
    with pytest.raises(ValueError, match="ids"):
        kube_score.WaiverFile.model_validate(
            {"waivers": [{"check": "pod-probes", "reason": "r", "ids": []}]}
        )
