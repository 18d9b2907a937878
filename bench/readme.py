"""``python -m bench report``: bench/README.md's generated sections and bench/charts/ from JSON.

Each benchmark writes ``.local/measurements/bench-<name>.json``. The report copies the newest of
each into ``bench/results/`` (committed, so the report can be rebuilt anywhere without a cluster),
then renders from there: one table of every figure with its reference from the same run and the
ratio, where and with what it ran, and PNG charts. Only the text between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` is replaced; the rest of the README
is hand-written.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.plane import LOCAL, ROOT

BENCH = ROOT / "bench"
README = BENCH / "README.md"
RESULTS = BENCH / "results"
CHARTS = BENCH / "charts"
MEASUREMENTS = LOCAL / "measurements"
NAMES = ("podset", "configmapsync", "poddebugger", "scale", "versus", "curve")
TITLES = {
    "podset": "PodSet vs ReplicaSet",
    "configmapsync": "ConfigMapSync vs plain client",
    "poddebugger": "PodDebugger vs plain client",
    "scale": "Scale (reference: kube-controller-manager, same window)",
    "versus": "Each operator vs its Go reference, side by side",
    "curve": "Scale curve vs the Go references",
}
GO_REFERENCE = ("versus", "curve")
"""Benchmarks against the Go references (bench/reference): rows with pair, opsuite, go."""
Document = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    """One line of the report's table."""

    benchmark: str
    label: str
    value: float
    reference: float | None
    ratio: float | None
    target: str
    met: bool | None


def collect(measurements: Path = MEASUREMENTS, results: Path = RESULTS) -> dict[str, Document]:
    """Copy newer measurements into ``results``; every benchmark's document found there."""
    results.mkdir(parents=True, exist_ok=True)
    documents: dict[str, Document] = {}
    for name in NAMES:
        fresh, kept = measurements / f"bench-{name}.json", results / f"{name}.json"
        if fresh.exists() and (not kept.exists() or fresh.stat().st_mtime > kept.stat().st_mtime):
            shutil.copyfile(fresh, kept)
        if kept.exists():
            documents[name] = json.loads(kept.read_text())
    return documents


def figures(name: str, document: Document) -> list[Figure]:
    """The table rows of one benchmark's document."""
    rows: list[Figure] = []
    for row in document.get("summary", []):
        if name == "podset":
            ratio = row["ratio"]
            if ratio is None and row["replicaset"]:
                ratio = row["podset"] / row["replicaset"]
            rows.append(
                Figure(
                    name,
                    row["label"],
                    row["podset"],
                    row["replicaset"],
                    ratio,
                    row["target"],
                    row["met"],
                )
            )
        elif name in GO_REFERENCE:
            rows.append(
                Figure(
                    name,
                    f"{row['pair']}: {row['label']}",
                    row["opsuite"],
                    row["go"],
                    row["ratio"],
                    row["target"],
                    row["met"],
                )
            )
        elif name == "scale":
            target = _scale_target(row["metric"])
            rows.append(
                Figure(
                    name,
                    f"{row['operator']}: {row['label']}",
                    row["value"],
                    row["reference"],
                    row["ratio"],
                    target,
                    row["met"],
                )
            )
        else:
            rows.append(
                Figure(
                    name,
                    row["label"],
                    row["operator"],
                    row["reference"],
                    row["ratio"],
                    row["target"],
                    row["met"],
                )
            )
    return rows


def _scale_target(metric: str) -> str:
    if metric.startswith("rss"):
        return "<= 120 MiB"
    if metric in ("writes", "lists"):
        return "0"
    return "reported"


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _met(met: bool | None) -> str:
    return {True: "yes", False: "**NO**", None: "-"}[met]


def figure_table(rows: Sequence[Figure]) -> str:
    """The Markdown table of every figure."""
    lines = [
        "| benchmark | figure | opsuite | reference | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.benchmark} | {r.label} | {_number(r.value)} | {_number(r.reference)} | "
            f"{_number(r.ratio)} | {r.target} | {_met(r.met)} |"
        )
    return "\n".join(lines)


def environment_table(documents: dict[str, Document]) -> str:
    """Where, when and with what each benchmark ran."""
    lines = [
        "| benchmark | date (UTC) | duration | commit | opsuite | Kubernetes | Python | cores "
        "| memory | load avg before → after |",
        "|---|---|---:|---|---|---|---|---:|---:|---|",
    ]
    for name, doc in documents.items():
        env = doc.get("environment", {})
        before = env.get("load_average_before") or [math.nan]
        after = env.get("load_average_after") or [math.nan]
        memory = env.get("memory_gib")
        lines.append(
            f"| {name} | {env.get('date', '?')} | {env.get('duration_s', '?')} s | "
            f"{env.get('commit', '?')} | {env.get('opsuite', '?')} | {env.get('kubernetes', '?')} "
            f"| {env.get('python', '?')} | {env.get('cpus', '?')} | "
            f"{f'{memory} GiB' if memory else '?'} | {before[0]:.1f} → {after[0]:.1f} |"
        )
    return "\n".join(lines)


def scale_details(document: Document) -> str:
    """Requests by verb in the quiet window, and the memory profile, as Markdown."""
    result = document["result"]
    config = document["config"]
    lines = [
        f"Quiet window: {config['quiet_s']:.0f} s, opened {config['settle_s']:.0f} s after the "
        f"load was done. Load done, seconds after the first create: "
        + ", ".join(f"{k} {v}" for k, v in result["converged_s"].items())
        + ".",
        "",
        "| process | RSS synced MiB | RSS end MiB | CPU s in window | requests by verb |",
        "|---|---:|---:|---:|---|",
    ]
    for name, req in result["requests"].items():
        verbs = ", ".join(f"{v} {n}" for v, n in req.get("by_verb", {}).items()) or "none"
        lines.append(
            f"| {name} | {_number(result['rss_synced_mib'].get(name))} | "
            f"{_number(result['rss_end_mib'].get(name))} | "
            f"{_number(result['cpu_quiet_s'].get(name))} | {verbs} |"
        )
    lines += ["", "Every request in the window, by verb, resource and User-Agent product:", ""]
    for name, req in result["requests"].items():
        detail = ", ".join(f"{k}: {n}" for k, n in req.get("by_request", {}).items()) or "none"
        lines.append(f"- {name}: {detail}")
    profile = result.get("profile") or {}
    if profile.get("error"):
        lines += ["", f"The tracemalloc profile failed: {profile['error']}"]
    elif profile:
        lines += [
            "",
            f"tracemalloc of **{profile['operator']}** (restarted under `python -X "
            f"tracemalloc=10`, dumped 30 s after its caches synced): {profile['traced_mib']} "
            f"MiB traced, RSS {profile['rss_under_tracemalloc_mib']} MiB under tracemalloc.",
            "",
            "| MiB | allocated for (innermost frame outside json, asyncio, aiohttp) |",
            "|---:|---|",
        ]
        lines += [f"| {c['mib']} | `{c['caller']}` |" for c in profile["by_caller"][:10]]
        lines += ["", "| MiB | blocks | line |", "|---:|---:|---|"]
        lines += [
            f"| {s['mib']} | {s['blocks']} | `{s['site']}` |" for s in profile["by_line"][:10]
        ]
    return "\n".join(lines)


Row = dict[str, Any]
TARGETS: tuple[tuple[str, str, str, Callable[[Row], bool]], ...] = (
    (
        "RSS at 5,000 and at 20,000 objects",
        "ratio <= 1.0",
        "curve",
        lambda r: r["label"].endswith(": RSS (MiB)") and r["objects"] in (5000, 20000),
    ),
    (
        "time to converge (each workload)",
        "ratio <= 1.0",
        "versus",
        lambda r: r["label"].startswith("converge:"),
    ),
    (
        "CPU seconds per workload",
        "ratio <= 1.5",
        "versus",
        lambda r: r["label"].startswith("CPU seconds"),
    ),
    (
        "start to Ready with 20,000 objects present",
        "ratio <= 1.5",
        "curve",
        lambda r: r["label"].endswith(": start to Ready (s)") and r["objects"] == 20000,
    ),
    (
        "API requests per workload",
        "ratio <= 1.0",
        "versus",
        lambda r: r["label"].startswith("API requests"),
    ),
    (
        "start to Ready, small workloads",
        "ratio <= 3.0",
        "versus",
        lambda r: r["label"].startswith("start to Ready"),
    ),
    (
        "RSS, small workloads",
        "ratio <= 1.2",
        "versus",
        lambda r: r["label"].startswith("RSS after"),
    ),
)
"""The targets of #19 and #36 (opsuite / Go reference, same run): title, limit, benchmark, its
rows."""


def targets_table(documents: dict[str, Document]) -> str:
    """Every figure that has a target against the Go references, met or missed, with the ratio."""
    lines = [
        "| target | limit | pair | figure | opsuite | Go | ratio | met |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    met = total = 0
    for title, limit, name, selects in TARGETS:
        rows = [r for r in documents.get(name, {}).get("summary", []) if selects(r)]
        if not rows:
            lines.append(f"| {title} | {limit} | - | not measured | - | - | - | - |")
        for r in rows:
            total += 1
            met += bool(r["met"])
            lines.append(
                f"| {title} | {limit} | {r['pair']} | {r['label']} | {_number(r['opsuite'])} | "
                f"{_number(r['go'])} | {_number(r['ratio'])} | "
                f"{'met' if r['met'] else '**missed**'} |"
            )
    return f"{met} of {total} figures meet their target.\n\n" + "\n".join(lines)


def ecdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Sorted values and their cumulative fractions."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered, [(i + 1) / n for i in range(n)]


def render_charts(documents: dict[str, Document], out: Path = CHARTS) -> list[tuple[str, str]]:
    """Write the PNG charts the documents allow; (title, file name) of each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, str]] = []

    def save(fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=100, metadata={"Software": None})
        plt.close(fig)
        made.append((title, name))

    podset = documents.get("podset")
    if podset and any(t.get("create_times_s") for t in podset["trials"]):
        fig, ax = plt.subplots(figsize=(7, 4))
        for t in podset["trials"]:
            times = sorted(t.get("create_times_s") or [])
            if times:
                ax.step(
                    times,
                    range(1, len(times) + 1),
                    where="post",
                    label=f"{t['workload']} r{t['round']}",
                )
        ax.set(xlabel="seconds after the scale-up PATCH", ylabel="pods created (audit log)")
        ax.set_title("Pods created over time, 0 → N")
        ax.legend()
        save(fig, "podset-created-over-time.png", "PodSet vs ReplicaSet: pods created over time")

    for name, title in (
        ("configmapsync", "ConfigMapSync: single-destination propagation latency"),
        ("poddebugger", "PodDebugger: single-pod Running → injected latency"),
    ):
        doc = documents.get(name)
        if not doc:
            continue
        result = doc["result"]
        fig, ax = plt.subplots(figsize=(7, 4))
        for values, label in (
            (result.get("single_latency_s") or [], "operator"),
            (result.get("single_reference_s") or [], "reference (raw round-trip)"),
        ):
            if values:
                xs, ys = ecdf([v * 1000 for v in values])
                ax.step(xs, ys, where="post", label=label)
        ax.set(xlabel="milliseconds", ylabel="fraction of samples")
        ax.set_title(title)
        ax.legend()
        save(fig, f"{name}-latency.png", title)

    curve = documents.get("curve")
    if curve and curve.get("points"):
        fig, ax = plt.subplots(figsize=(8, 4.5))
        lines: dict[str, list[tuple[int, float]]] = {}
        for point in curve["points"]:
            side = "opsuite" if point["side"] == "opsuite" else "Go reference"
            lines.setdefault(f"{point['pair']} ({side})", []).append(
                (point["objects"], point["rss_mib"])
            )
        for label, xy in sorted(lines.items()):
            xy.sort()
            style = "-" if "opsuite" in label else "--"
            ax.plot([x for x, _ in xy], [y for _, y in xy], style, marker="o", label=label)
        ax.set(xlabel="watched objects", ylabel="RSS (MiB)")
        ax.set_title("RSS against watched objects: opsuite and the Go references")
        ax.legend(fontsize=8)
        save(fig, "curve-rss.png", "Scale curve: RSS against watched objects")

    scale = documents.get("scale")
    if scale and scale["result"].get("rss_series"):
        result = scale["result"]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for proc, samples in result["rss_series"].items():
            if samples:
                ax.plot([s[0] for s in samples], [s[1] for s in samples], label=proc)
        for phase, at in result.get("phases", {}).items():
            ax.axvline(at, color="grey", linestyle=":", linewidth=1)
            ax.text(
                at,
                0.02,
                phase,
                transform=ax.get_xaxis_transform(),
                rotation=90,
                fontsize=7,
                va="bottom",
                ha="right",
            )
        ax.axhline(120, color="red", linestyle="--", linewidth=1, label="goal 120 MiB")
        ax.set(xlabel="seconds since the operators started", ylabel="RSS (MiB)")
        ax.set_title("Scale run: resident memory over time")
        ax.legend(fontsize=8)
        save(fig, "scale-rss.png", "Scale: RSS over time")
    return made


MARKER = re.compile(
    r"(<!-- generated:(?P<name>[a-z-]+) -->\n).*?(<!-- /generated:(?P=name) -->)", re.S
)


def replace_sections(text: str, sections: dict[str, str]) -> str:
    """Replace the body of each ``<!-- generated:NAME -->`` block named in ``sections``."""
    missing = set(sections) - {m.group("name") for m in MARKER.finditer(text)}
    if missing:
        raise ValueError(f"no generated section(s) {sorted(missing)} in the README")
    return MARKER.sub(
        lambda m: (
            m.group(1) + sections.get(m.group("name"), "").strip() + "\n" + m.group(3)
            if m.group("name") in sections
            else m.group(0)
        ),
        text,
    )


def render(documents: dict[str, Document], charts: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The generated sections' Markdown."""
    rows = [f for name, doc in documents.items() for f in figures(name, doc)]
    summary = [
        "Generated by `python -m bench report` from `bench/results/*.json`; the machine is a "
        "shared 2-core one, busy with other work during the runs (see the load averages), so "
        "time and CPU figures carry that noise; RSS, request and write counts do not.",
        "",
        environment_table(documents),
        "",
        figure_table(rows),
        "",
    ]
    summary += [f"![{title}](charts/{name})" for title, name in charts]
    sections = {"summary": "\n".join(summary)}
    if "scale" in documents:
        sections["scale"] = scale_details(documents["scale"])
    if any(name in documents for name in GO_REFERENCE):
        sections["targets"] = targets_table(documents)
    return sections


def main() -> int:
    """Rebuild the report from the saved measurements; 0, or 2 when there is nothing to show."""
    documents = collect()
    if not documents:
        print(f"no measurements in {MEASUREMENTS} or {RESULTS}; run python -m bench first")
        return 2
    charts = render_charts(documents)
    README.write_text(replace_sections(README.read_text(), render(documents, charts)))
    print(f"{README.relative_to(ROOT)} and {len(charts)} charts in bench/charts/ written")
    return 0
