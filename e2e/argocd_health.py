"""What Argo CD would show for the custom resources the e2e suite reads: every object of an
operator's own kind that :func:`e2e.cluster.condition` is asked about is kept, one per distinct
status, so that e2e/test_argocd_health.py can run docs/argocd/health.lua on each as Argo CD
runs it (gopher-lua, ``.local/bin/argocd-health``) and hold it to what the conditions say."""

from __future__ import annotations

import copy
import json
from typing import Any

from opsuite_packaging.operators import OPERATORS

KINDS = {op.crds[0].split(".", 1)[1]: op.name for op in OPERATORS}
"""Each operator's own API group (the first CRD of its entry), and the operator."""
OBSERVED: dict[str, dict[str, dict[str, Any]]] = {}
"""Per operator, the objects read, keyed by what Argo CD's health depends on."""


def _status_key(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    conditions = [
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for c in status.get("conditions") or []
    ]
    generations = (obj.get("metadata", {}).get("generation"), status.get("observedGeneration"))
    return json.dumps([generations, conditions])


def observe(obj: dict[str, Any]) -> None:
    """Keep ``obj`` when it is one of the operators' own kinds with a status not seen before."""
    group = str(obj.get("apiVersion", "")).partition("/")[0]
    operator = KINDS.get(group)
    if operator is not None:
        OBSERVED.setdefault(operator, {}).setdefault(_status_key(obj), copy.deepcopy(obj))


def expected(obj: dict[str, Any]) -> str:
    """The health docs/argocd.md promises for ``obj``: Degraded when its Degraded condition is
    True (or a rollout passed its deadline), Suspended while paused, Healthy when Ready is True,
    else Progressing; and Progressing while the operator has not seen the current generation."""
    status = obj.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    generation = obj.get("metadata", {}).get("generation") or 0
    if not conditions or (status.get("observedGeneration") or 0) < generation:
        return "Progressing"
    progressing = conditions.get("Progressing", {})
    if conditions.get("Degraded", {}).get("status") == "True" or (
        progressing.get("status") == "False"
        and progressing.get("reason") == "ProgressDeadlineExceeded"
    ):
        return "Degraded"
    if progressing.get("reason") == "Paused":
        return "Suspended"
    return "Healthy" if conditions.get("Ready", {}).get("status") == "True" else "Progressing"
