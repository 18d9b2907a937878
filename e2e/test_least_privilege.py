"""Least privilege, proven by the audit log of this very run (``after_suite``: it runs last).

Every operator the suite started ran as its chart's ServiceAccount (e2e.charts). This test
reads what those identities asked of the API server during the session: the authorizer may have
refused no request, and every rule the chart grants should have been used by some request.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from kubernetes import client

from e2e.charts import CHARTS, lease_rules, requests_by, service_account_user, unused_grants
from e2e.cluster import Cluster, flush_audit_log

pytestmark = [
    pytest.mark.local_operators("reads what the suite's local operator processes asked for"),
    pytest.mark.after_suite,
]

OPERATOR_TEST_MODULES = {
    "test_podset.py",
    "test_configmapsync.py",
    "test_poddebugger.py",
    "test_poddebugger_security.py",
    "test_poddebugger_requester.py",
    "test_poddebugger_copy.py",
    "test_podset_requester.py",
    "test_podset_rollouts.py",
    "test_configmapsync_requester.py",
    "test_secretsync.py",
    "test_secretsync_disabled.py",
    "test_leader_election.py",
    "test_charts.py",
}
"""Modules whose tests together exercise every rule of the charts."""


def test_operators_used_every_rule_of_their_chart_and_were_never_refused(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    api: client.ApiClient,
    operator_identities: datetime,
) -> None:
    if cluster.audit_log is None:
        pytest.skip(f"needs the local plane's audit log; the cluster is {cluster.kind}")
    if not cluster.operator_kubeconfigs:
        pytest.skip("the operators ran as admin (E2E_OPERATOR_IDENTITY=admin)")
    flush_audit_log(cluster, api)
    report: dict[str, dict[str, list[str]]] = {}
    for spec in CHARTS.values():
        requests = list(
            requests_by(cluster.audit_log, service_account_user(spec), operator_identities)
        )
        optional = tuple(rule for o in spec.optional_rules for rule in o.rules)  # all on in e2e
        rules = spec.namespaced_rules + optional + spec.cluster_rules + lease_rules(spec, spec.name)
        report[spec.name] = {
            "requests": [f"{len(requests)}"],
            "refused": sorted(
                {
                    f"{r.verb} {r.resource} {r.namespace}/{r.name}"
                    for r in requests
                    if r.denied_by_rbac
                }
            ),
            "unused": [
                f"{verb} {group or 'core'}/{resource}"
                for group, resource, verb in unused_grants(rules, requests)
            ],
        }
    print("\n" + json.dumps(report, indent=2))
    assert all(not r["refused"] for r in report.values()), report
    ran = {item.path.name for item in request.session.items}
    if not ran >= OPERATOR_TEST_MODULES:
        pytest.skip(f"only a full run uses every rule; unused this time: {report}")
    assert all(not r["unused"] for r in report.values()), report
