"""Entry point of the ConfigMapSync and PodDebugger benchmarks (``python -m bench configmapsync``,
``python -m bench poddebugger``): run, print the table, write the JSON, exit status as for the
PodSet benchmark."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import configmapsync, plane, poddebugger
from bench.runner import Environment, measure, write_document


def main(
    args: argparse.Namespace,
    environment: Environment,
) -> int:
    """Run ``args.benchmark``; the exit status (0 done, 1 missed with --strict; runner.Failed)."""
    name = args.benchmark
    output = Path(args.output or plane.LOCAL / "measurements" / f"bench-{name}.json")
    config: configmapsync.Config | poddebugger.Config
    if name == "configmapsync":
        config = configmapsync.Config(
            destinations=args.destinations,
            updates=args.samples or configmapsync.Config.updates,
            rounds=args.rounds or configmapsync.Config.rounds,
            timeout=args.timeout,
        )
    else:
        config = poddebugger.Config(
            pods=args.pods,
            singles=args.samples or poddebugger.Config.singles,
            rounds=args.rounds or poddebugger.Config.rounds,
            timeout=args.timeout,
        )

    def run(api: client.ApiClient) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """(summary rows, table, result)."""
        if isinstance(config, configmapsync.Config):
            cms = configmapsync.run(api, config)
            rows = configmapsync.summary(cms, config)
            return rows, configmapsync.table(rows, cms, config), asdict(cms)
        pdb = poddebugger.run(api, config)
        rows = poddebugger.summary(pdb, config)
        return rows, poddebugger.table(rows, pdb, config), asdict(pdb)

    log = configmapsync.OPERATOR_LOG if name == "configmapsync" else poddebugger.OPERATOR_LOG
    (rows, text, result), env = measure(run, environment, f"benchmark failed (operator log: {log})")
    print()
    print(text)
    document = {
        "benchmark": name,
        "config": asdict(config),
        "environment": env,
        "result": result,
        "summary": rows,
        "targets_met": all(r["met"] for r in rows),
    }
    return write_document(output, document, strict=args.strict)
