"""kube-score, the linter users' CI runs on charts, on every chart as ``helm template`` renders it:
with its defaults, and with every optional object on (the PodDisruptionBudget of two replicas,
the NetworkPolicy, ServiceMonitor, PrometheusRule, dashboard, a mounted metrics certificate):
its default checks, and the optional ones the charts pass (OPTIONAL_CHECKS).

Each warning or critical finding fails unless charts/kube-score-waivers.yaml waives it, with the
reason, by check ID (and a part of the finding's summary, to waive one finding of a check that
reports several kinds); a waiver naming a check kube-score does not know, or that no finding
needs any more, fails too. kube-score is the pinned hack/tools/kube-score
(``hack/build-tools.sh helm kube-score``, as ``make lint`` runs it first).

Usage: python3 hack/kube_score.py
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from helm_render import ROOT, helm_template
from pydantic import BaseModel, ConfigDict, Field

from opsuite_packaging.chart import MIN_KUBE_VERSION
from opsuite_packaging.operators import OPERATORS

KUBE_SCORE = ROOT / ".local" / "bin" / "kube-score"
WAIVERS = ROOT / "charts" / "kube-score-waivers.yaml"
KUBERNETES_VERSION = "v" + ".".join(MIN_KUBE_VERSION.split(".")[:2])
"""The oldest Kubernetes the charts support: kube-score's deprecated-API check reads it."""

EVERYTHING_ON: Mapping[str, Any] = {
    "replicaCount": 2,
    "podDisruptionBudget": {"enabled": True},
    "networkPolicy": {"enabled": True},
    "metrics": {
        "certSecret": "metrics-tls",
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
    },
    "dashboard": {"enabled": True},
}
RENDERINGS: Mapping[str, Mapping[str, Any]] = {"defaults": {}, "everything on": EVERYTHING_ON}

OPTIONAL_CHECKS = ("container-seccomp-profile", "container-ports-check")
"""kube-score's optional checks the charts pass (a seccomp profile; ports named, unique and in
range), on so that they keep passing."""

WARNING = 5
"""kube-score's grade of a warning (critical is 1, OK 10): at or below it is a finding."""


class Waiver(BaseModel):
    """A finding that stays, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check: str = Field(min_length=1)
    summary: str = ""
    """Only the check's findings whose summary contains this; empty: all of them."""
    reason: str = Field(min_length=1)


class WaiverFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    waivers: list[Waiver]


@dataclass(frozen=True)
class Finding:
    where: str
    """Chart, rendering and object."""
    check: str
    grade: str
    summary: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.grade}] {self.check}: {self.summary}"

    def waived_by(self, waiver: Waiver) -> bool:
        return waiver.check == self.check and waiver.summary in self.summary


def charts() -> list[str]:
    return [importlib.import_module(op.manifests).CHART_SPEC.name for op in OPERATORS]


def load_waivers() -> list[Waiver]:
    return WaiverFile.model_validate(yaml.safe_load(WAIVERS.read_text())).waivers


def _kube_score(*args: str, stdin: str | None = None) -> str:
    if not KUBE_SCORE.exists():
        raise SystemExit(f"{KUBE_SCORE} missing: run hack/build-tools.sh kube-score")
    done = subprocess.run(
        [str(KUBE_SCORE), *args], input=stdin, capture_output=True, text=True, check=False
    )
    # Exit code 1 means a critical finding, read from the output like the others.
    if done.returncode not in (0, 1) or not done.stdout:
        raise SystemExit(f"kube-score {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


def known_checks() -> set[str]:
    """The IDs of every check kube-score has (``kube-score list``: ID,target,comment,kind)."""
    return {line.split(",", 1)[0] for line in _kube_score("list").splitlines() if line}


def score(manifests: str, where: str) -> list[Finding]:
    """kube-score's default and OPTIONAL_CHECKS on a manifest stream: the warnings and critical
    findings."""
    command = ["score", "--kubernetes-version", KUBERNETES_VERSION, "-o", "json"]
    for check in OPTIONAL_CHECKS:
        command += ["--enable-optional-test", check]
    scored = json.loads(_kube_score(*command, "-", stdin=manifests))
    findings = []
    for obj in scored:
        meta, kind = obj["object_meta"], obj["type_meta"]["kind"]
        at = f"{where} {kind} {meta.get('namespace', '')}/{meta['name']}"
        for result in obj["checks"]:
            if result["skipped"] or result["grade"] > WARNING:
                continue
            grade = "CRITICAL" if result["grade"] < WARNING else "WARNING"
            check = result["check"]["id"]
            for comment in result["comments"] or [{"path": "", "summary": result["check"]["name"]}]:
                summary = ": ".join(p for p in (comment["path"], comment["summary"]) if p)
                findings.append(Finding(at, check, grade, summary))
    return sorted(findings, key=lambda f: (f.where, f.check, f.summary))


def chart_findings(names: Iterable[str]) -> list[Finding]:
    """Every chart's findings in each of RENDERINGS."""
    return [
        finding
        for chart in names
        for rendering, values in RENDERINGS.items()
        for finding in score(helm_template(chart, values=values), f"{chart} ({rendering})")
    ]


def problems(findings: Sequence[Finding], waivers: Sequence[Waiver], known: set[str]) -> list[str]:
    """What fails the gate: findings no waiver covers, waivers of unknown checks, stale ones."""
    out = [str(f) for f in findings if not any(f.waived_by(w) for w in waivers)]
    for waiver in waivers:
        label = f"waiver {waiver.check}" + (f" ({waiver.summary!r})" if waiver.summary else "")
        if waiver.check not in known:
            out.append(f"{label}: kube-score has no such check")
        elif not any(f.waived_by(waiver) for f in findings):
            out.append(f"{label}: no finding needs it any more; remove it")
    return out


def main() -> int:
    failed = problems(chart_findings(charts()), load_waivers(), known_checks())
    waivers = os.path.relpath(WAIVERS, ROOT)
    if failed:
        print(f"kube-score: {len(failed)} problem(s) ({waivers} waives findings, with the reason):")
        for line in failed:
            print(f"  {line}")
        return 1
    print(f"kube-score: {', '.join(charts())}: no finding but those {waivers} waives")
    return 0


if __name__ == "__main__":
    sys.exit(main())
