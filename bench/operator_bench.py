"""Entry point of the ConfigMapSync and PodDebugger benchmarks (``python -m bench configmapsync``,
``python -m bench poddebugger``): run, print the table, write the JSON, exit status as for the
PodSet benchmark."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import configmapsync, plane, poddebugger


def main(
    args: argparse.Namespace,
    environment: Callable[[str, tuple[float, ...]], dict[str, Any]],
) -> int:
    """Run ``args.benchmark``; the exit status (0 done, 1 missed with --strict, 2 error, 130)."""
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
    try:
        plane.ensure_up()
        api = plane.api_client()
        load_before = os.getloadavg()
        started = time.monotonic()
        if isinstance(config, configmapsync.Config):
            cms = configmapsync.run(api, config)
            rows = configmapsync.summary(cms, config)
            text = configmapsync.table(rows, cms, config)
            result: dict[str, Any] = asdict(cms)
        else:
            pdb = poddebugger.run(api, config)
            rows = poddebugger.summary(pdb, config)
            text = poddebugger.table(rows, pdb, config)
            result = asdict(pdb)
        env = environment(plane.server_version(api), load_before)
        env["duration_s"] = round(time.monotonic() - started, 1)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        log = configmapsync.OPERATOR_LOG if name == "configmapsync" else poddebugger.OPERATOR_LOG
        print(f"benchmark failed (operator log: {log})", file=sys.stderr)
        return 2
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
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"\nwritten to {output}")
    met = all(r["met"] for r in rows)
    return 1 if args.strict and not met else 0
