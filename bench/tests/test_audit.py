"""Audit-log parsing and the per-process request aggregation of the scale benchmark."""

from __future__ import annotations

import json
from pathlib import Path

from bench.audit import AuditTail, by_user, by_user_prefix, in_window, request_summary


def _line(audit_id: str, verb: str, resource: str, user: str, agent: str, at: str) -> str:
    return json.dumps(
        {
            "auditID": audit_id,
            "requestReceivedTimestamp": f"2026-11-22T03:00:{at}.000000Z",
            "user": {"username": user},
            "userAgent": agent,
            "verb": verb,
            "objectRef": {"resource": resource, "namespace": "ns", "subresource": ""},
            "responseStatus": {"code": 200},
        }
    )


OP = "system:serviceaccount:opsuite-bench-scale:podset-operator"


def test_tail_reads_appended_lines_once_per_audit_id(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(_line("old", "list", "pods", OP, "kopf/1.45.2", "00") + "\n")
    tail = AuditTail(log, "")
    with log.open("a") as f:
        f.write(_line("a", "watch", "pods", OP, "kopf/1.45.2", "10") + "\n")
        f.write(_line("a", "watch", "pods", OP, "kopf/1.45.2", "10") + "\n")  # ResponseComplete
        f.write(_line("b", "patch", "podsets", OP, "podset-operator/0.1.0 (bench)", "20") + "\n")
        f.write('{"truncated')
    tail.poll()
    tail.close()
    assert sorted(tail.events) == ["a", "b"]


def test_request_summary_counts_verbs_writes_lists_and_agents(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text("")
    tail = AuditTail(log, "")
    lines = [
        _line("1", "watch", "pods", OP, "kopf/1.45.2", "10"),
        _line("2", "watch", "podsets", OP, "kopf/1.45.2", "11"),
        _line("3", "list", "pods", OP, "podset-operator/0.1.0 (bench)", "12"),
        _line("4", "patch", "podsets", OP, "podset-operator/0.1.0 (bench)", "13"),
        _line("5", "create", "events", OP, "podset-operator/0.1.0 (bench)", "59"),
        _line("6", "update", "leases", "system:serviceaccount:kube-system:x", "kcm", "14"),
    ]
    log.write_text("\n".join(lines) + "\n")
    tail.poll()
    events = list(tail.events.values())
    start = events[0].received
    mine = in_window(events, by_user(OP), start, start + 10)
    summary = request_summary(mine)
    assert summary["by_verb"] == {"watch": 2, "list": 1, "patch": 1}
    assert (summary["writes"], summary["lists"], summary["watches"], summary["total"]) == (
        1,
        1,
        2,
        4,
    )
    assert summary["by_request"]["watch pods (kopf)"] == 1
    assert summary["by_request"]["patch podsets (podset-operator)"] == 1
    kcm = in_window(events, by_user_prefix("system:serviceaccount:kube-system:"), 0, 1e12)
    assert request_summary(kcm)["writes"] == 1


def test_request_summary_of_nothing() -> None:
    assert request_summary([]) == {
        "total": 0,
        "by_verb": {},
        "by_request": {},
        "writes": 0,
        "lists": 0,
        "watches": 0,
    }
