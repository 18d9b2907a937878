"""``python -m bench [podset|configmapsync|poddebugger|scale|probes|all|report] [flags]``.

Starts the local control plane when it is down, runs the chosen benchmark (default: the
PodSet-vs-ReplicaSet one), prints a table and writes .local/measurements/bench-<name>.json.
``all`` runs the four and then ``report``, which rebuilds bench/README.md's generated sections
and bench/charts/ from the saved JSON (no cluster needed). ``probes`` (probe latency under a
PodSet 0 -> N -> 0 load) runs against ``--kubeconfig`` and never starts the plane.
Exits 0 when the run completed (targets missed or not, the report says), 1 with ``--strict``
when a target was missed, 2 on an error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import signal
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import FrameType
from typing import Any

from bench import curve, operator_bench, plane, probes, readme, scale, versus
from bench.podset_vs_replicaset import Config, run
from bench.report import summarize, table, write_json
from bench.runner import Failed, measure

OUTPUT = plane.LOCAL / "measurements" / "bench-podset.json"


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    defaults = Config()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "benchmark",
        nargs="?",
        default="podset",
        choices=[
            "podset",
            "configmapsync",
            "poddebugger",
            "scale",
            "versus",
            "curve",
            "probes",
            "all",
            "report",
        ],
    )
    parser.add_argument(
        "--kubeconfig",
        default=str(plane.KUBECONFIG),
        help="probes: the cluster to run against (default: the local plane's; never started).",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=0.2,
        help="probes: seconds between two probes of one endpoint (default 0.2).",
    )
    parser.add_argument(
        "--quiet-window",
        type=float,
        default=None,
        help="scale: seconds of the quiet window (default 600); versus: after the restart "
        "(default 30).",
    )
    parser.add_argument(
        "--pairs",
        default=None,
        help="versus, curve: comma-separated pairs to run (default podset,configmapsync,"
        "poddebugger).",
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="curve: comma-separated numbers of watched objects (default 1000,5000,20000).",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=scale.Config.settle_s,
        help="scale: seconds between the load done and the window (default 60).",
    )
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="scale: skip the tracemalloc profile of the largest operator.",
    )
    parser.add_argument(
        "--destinations",
        type=_positive_int,
        default=500,
        help="configmapsync: destination namespaces (default 500).",
    )
    parser.add_argument(
        "--pods",
        type=_positive_int,
        default=200,
        help="poddebugger: pods created at once (default 200).",
    )
    parser.add_argument(
        "--samples",
        type=_positive_int,
        default=None,
        help="configmapsync: single-destination updates (default 30); "
        "poddebugger: single pods (default 20).",
    )
    parser.add_argument(
        "--replicas",
        type=_positive_int,
        default=defaults.replicas,
        help="Pods to scale each controller to (default 500).",
    )
    parser.add_argument(
        "--rounds",
        type=_positive_int,
        default=None,
        help="Rounds; each runs the operator and its reference, the order alternating "
        "(default: podset and configmapsync 2, poddebugger 3).",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=defaults.phase_timeout,
        help="Seconds to wait for any one milestone (default 300).",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=defaults.pause,
        help="Quiet seconds between trials (default 5).",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=defaults.retries,
        help="Repeats of a trial during which the API server stalled (default 2).",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="Where to write the JSON (default .local/measurements/bench-<benchmark>.json).",
    )
    parser.add_argument("--strict", action="store_true", help="Exit 1 when a target is missed.")
    return parser.parse_args(argv)


def _git(*args: str) -> str:
    """Output of a read-only git command (no optional locks: it never writes the index)."""
    out = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(plane.ROOT), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def _git_commit() -> str:
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    changed = _git("status", "--porcelain", "--", "operators", "shared")
    return commit + (" (operators/ or shared/ modified)" if changed else "")


def _opsuite_version() -> str:
    try:
        return version("opsuite")
    except PackageNotFoundError:
        return "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        return None
    return None


def environment(kubernetes_version: str, load_before: tuple[float, ...]) -> dict[str, Any]:
    """Where and when the figures were taken."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench", *sys.argv[1:]]),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "kubernetes": kubernetes_version,
        "python": platform.python_version(),
        "opsuite": _opsuite_version(),
        "commit": _git_commit(),
        "nodes": "kwok fake nodes (hack/localplane.py)",
    }


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmark(s); the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    if args.benchmark == "report":
        return readme.main()
    if args.benchmark != "all":
        return run_one(args)
    worst = 0
    for name in ("podset", "configmapsync", "poddebugger", "scale", "versus", "curve"):
        print(f"==================== bench {name} ====================", flush=True)
        code = run_one(argparse.Namespace(**{**vars(args), "benchmark": name, "output": None}))
        if code == 130:
            return code
        worst = max(worst, code)
    return max(worst, readme.main())


def run_one(args: argparse.Namespace) -> int:
    """Run one benchmark; its exit status (2 on an error, 130 when interrupted)."""
    try:
        return _run(args)
    except Failed as failed:
        return failed.code


def _run(args: argparse.Namespace) -> int:
    """Run one benchmark; the exit status of a run that completed (0, or 1 with --strict when a
    target was missed)."""
    if args.benchmark == "scale":
        return scale.main(args, environment)
    if args.benchmark == "versus":
        return versus.main(args, environment)
    if args.benchmark == "curve":
        return curve.main(args, environment)
    if args.benchmark == "probes":
        return probes.main(args, environment)
    if args.benchmark != "podset":
        return operator_bench.main(args, environment)
    config = Config(
        replicas=args.replicas,
        rounds=args.rounds or Config.rounds,
        phase_timeout=args.timeout,
        pause=args.pause,
        retries=args.retries,
    )
    trials, env = measure(
        lambda api: run(api, config),
        environment,
        "benchmark failed (operator log: .local/bench/podset-operator.log)",
    )
    rows = summarize(trials, config)
    print()
    print(table(rows, trials, config))
    output = Path(args.output or OUTPUT)
    write_json(output, rows, trials, config, env)
    print(f"\nwritten to {output}")
    met = all(r.met for r in rows)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
