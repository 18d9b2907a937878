"""``python -m bench.robustness``: docs/robustness.md's network-fault figures from the last run.

``make chaos`` (e2e/test_network_faults.py) writes ``.local/measurements/network-faults.json``.
This copies it, when newer, to ``docs/results/network-faults.json`` (committed, so the section
can be rebuilt without a cluster) and renders the ``<!-- generated:network-faults -->`` section
of docs/robustness.md from there, as ``python -m bench report`` does for bench/README.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.plane import LOCAL, ROOT
from bench.readme import replace_sections

DOC = ROOT / "docs" / "robustness.md"
RESULTS = ROOT / "docs" / "results" / "network-faults.json"
MEASUREMENTS = LOCAL / "measurements" / "network-faults.json"
SECTION = "network-faults"

# scenario -> its title and rows: (key in the scenario's figures, what it is, what it must be)
ROWS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "partition_podset": (
        "Leader partitioned during a PodSet scale-up 2→120, standby not",
        [
            ("pods_at_partition", "pods when the partition began", ""),
            ("failover_s", "standby leading after (s)", "≤ 17 (leaseDuration + retryPeriod)"),
            (
                "writes_after_renew_deadline",
                "old leader's writes received after its renew deadline",
                "0",
            ),
            ("writes_after_handover", "old leader's writes received after the handover", "0"),
            ("both_wrote_overlap_s", "time both wrote (s)", "0"),
            ("pods_over_replicas", "pods over `replicas` at any moment (pod watch)", "0"),
            ("old_leader_exit_code", "old leader's exit status", "1"),
            ("lease_writes_after_handover", "Lease writes by the old leader after the heal", "0"),
        ],
    ),
    "partition_configmapsync": (
        "Leader partitioned during a ConfigMapSync fan-out to 60 namespaces, standby not",
        [
            ("copies_at_partition", "copies when the partition began", ""),
            ("failover_s", "standby leading after (s)", "≤ 17"),
            (
                "writes_after_renew_deadline",
                "old leader's writes received after its renew deadline",
                "0",
            ),
            (
                "copies_by_old_leader_after_handover",
                "copies written by the old leader after the handover",
                "0",
            ),
            ("both_wrote_overlap_s", "time both wrote (s)", "0"),
            ("old_leader_exit_code", "old leader's exit status", "1"),
        ],
    ),
    "watch_gap_partition": (
        "Partition of 2 x --watch-timeout (5 s), then heal",
        [
            ("partition_s", "partition (s)", "10"),
            ("ready_after_heal_s", "/readyz 200 again after the heal (s)", ""),
            ("converged_after_heal_s", "deletions of the gap processed after the heal (s)", ""),
            ("pods_deleted/pods_created", "pods deleted in the gap / re-created", "equal"),
            ("copies_deleted/copies_created", "copies deleted in the gap / re-created", "equal"),
            ("copy_updates_max", "writes per copy for the source changed in the gap", "≤ 1"),
            ("refused_writes", "requests refused (409)", ""),
            ("writes_by_other_operators", "writes by other tests' operators", ""),
            ("copies_written_by_other_operators", "copies they wrote (left out above)", ""),
        ],
    ),
    "stalled_watch_streams": (
        "Watch streams stalled, requests answered (--watch-timeout 5 s)",
        [
            ("unready_after_s", "leader's /readyz failing after (s)", "≤ 2 x 5 (+ 2 s polling)"),
            (
                "stepped_down_after_s",
                "standby leading after (s)",
                "≤ 69 (5 + watch_dead_after 60 + 1 + 3)",
            ),
            ("held_chunks", "stream chunks held by the relay", "> 0"),
            ("old_leader_exit_code", "old leader's exit status", "1"),
        ],
    ),
}
WORKLOADS = {
    "podset_0_to_n_s": "PodSet 0 → 60 (s)",
    "poddebugger_n_pods_s": "PodDebugger on 10 pods (s)",
    "podset_n_to_0_s": "PodSet 60 → 0 (s)",
    "configmapsync_fan_out_s": "ConfigMapSync fan-out to 30 namespaces (s)",
    "configmapsync_fan_in_s": "its deletion, every copy removed (s)",
}


def collect(measurements: Path = MEASUREMENTS, results: Path = RESULTS) -> dict[str, Any]:
    """Copy newer measurements into ``results``; the figures found there ({} if none)."""
    results.parent.mkdir(parents=True, exist_ok=True)
    newer = measurements.exists() and (
        not results.exists() or measurements.stat().st_mtime > results.stat().st_mtime
    )
    if newer:
        shutil.copyfile(measurements, results)
    return dict(json.loads(results.read_text())) if results.exists() else {}


def _value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def render(figures: dict[str, Any]) -> str:
    """The generated section's Markdown."""
    lines = [
        "Generated by `python -m bench.robustness` from `docs/results/network-faults.json`, the "
        "last `make chaos` run of `e2e/test_network_faults.py` on the shared 2-core machine.",
        "",
        "| Scenario | Figure | Measured | Must be |",
        "|---|---|---:|---|",
    ]
    for scenario, (title, rows) in ROWS.items():
        if scenario not in figures:
            lines.append(f"| {title} | not run | | |")
            continue
        measured = figures[scenario]
        for key, label, bound in rows:
            if all(k in measured for k in key.split("/")):
                value = " / ".join(_value(measured[k]) for k in key.split("/"))
                lines.append(f"| {title} | {label} | {value} | {bound} |")
                title = ""
    slow = figures.get("latency_and_loss")
    if slow:
        lines += [
            "",
            f"300 ms RTT and {slow['loss']:.0%} loss against clean runs of the same operators "
            "before and after, in the same test (sizes reduced from the benchmarks' for time: "
            f"{slow['sizes']['pods']} pods, {slow['sizes']['destinations']} destination "
            f"namespaces, {slow['sizes']['debugged']} debugged pods):",
            "",
            "| Workload | clean | clean again | 300 ms RTT, 5 % loss | slowdown (vs their mean) |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, label in WORKLOADS.items():
            lines.append(
                f"| {label} | {slow['clean'][key]} | {slow['clean_again'][key]} "
                f"| {slow['faulted'][key]} | x {slow['slowdown'][key]} |"
            )
        lines += [
            f"| requests sent (`rest_client_requests_total`) | {slow['clean']['requests']} "
            f"| {slow['clean_again']['requests']} | {slow['faulted']['requests']} "
            f"| {slow['extra_requests']:+d} |",
            f"| of them without a response (`<error>`) | {slow['clean']['no_response']} "
            f"| {slow['clean_again']['no_response']} | {slow['faulted']['no_response']} | |",
        ]
    stamps = sorted(str(f.get("measured_at", "")) for f in figures.values() if isinstance(f, dict))
    if stamps:
        lines += ["", f"Measured {stamps[0]} to {stamps[-1]}."]
    return "\n".join(lines)


def main() -> int:
    """Rebuild the section; 0, or 2 when there is nothing to show."""
    figures = collect()
    if not figures:
        print(f"no {MEASUREMENTS} or {RESULTS}: run make chaos first")
        return 2
    DOC.write_text(replace_sections(DOC.read_text(), {SECTION: render(figures)}))
    print(f"{DOC.relative_to(ROOT)} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
