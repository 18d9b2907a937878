#!/usr/bin/env python3
"""The actions the workflows use, pinned by commit, with the runtime each declares there.

hack/workflow_actions.json records, for every ``owner/repo[/path]@sha`` in
``.github/workflows/``, its version (the comment beside the pin), the ``runs.using`` of its
``action.yml`` at that commit and, for a composite action, the actions it uses in turn. The unit
tests (hack/tests/test_workflows.py) check the record against the workflows and refuse a
runtime GitHub's runners no longer have; CI's ``check`` step reads every action.yml from GitHub
and fails when the record says otherwise, so the record cannot drift from what runs.

    hack/workflow_actions.py check     every recorded entry against its action.yml on GitHub
    hack/workflow_actions.py update    write the record anew from GitHub (after a pin moves)

``WORKFLOW_ACTIONS_SOURCE`` replaces the address files are read from (the tests' local server).
Only the standard library and PyYAML are used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
RECORD = ROOT / "hack" / "workflow_actions.json"
SOURCE = os.environ.get("WORKFLOW_ACTIONS_SOURCE", "https://raw.githubusercontent.com")
OLDEST_NODE = 24
"""The oldest Node major GitHub's hosted runners still run actions on."""

USES = re.compile(r"^\s*(?:-\s+)?uses:\s*([\w.-]+/[\w./-]+@[0-9a-f]{40})\s*(?:#\s*(\S+))?", re.M)


def used() -> dict[str, str]:
    """Every pinned action the workflows use, with the version its comment gives."""
    found: dict[str, str] = {}
    for workflow in sorted(WORKFLOWS.glob("*.yaml")):
        for action, version in USES.findall(workflow.read_text()):
            found[action] = version
    return found


def load() -> dict[str, dict[str, Any]]:
    record: dict[str, dict[str, Any]] = json.loads(RECORD.read_text())
    return record


def runtime_supported(using: str) -> bool:
    """Whether a ``runs.using`` still runs on GitHub's hosted runners."""
    node = re.fullmatch(r"node(\d+)", using)
    return int(node.group(1)) >= OLDEST_NODE if node else using in ("composite", "docker")


def _action_yml(action: str) -> dict[str, Any]:
    name, sha = action.split("@")
    owner, repo, *path = name.split("/")
    for file in ("action.yml", "action.yaml"):
        url = "/".join([SOURCE, owner, repo, sha, *path, file])
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                loaded: dict[str, Any] = yaml.safe_load(answer.read())
                return loaded
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
    raise SystemExit(f"{action}: no action.yml at {SOURCE}")


def entry(action: str, version: str) -> dict[str, Any]:
    """What the record says of ``action``, read from its action.yml."""
    runs = _action_yml(action)["runs"]
    found: dict[str, Any] = {"version": version, "using": str(runs["using"])}
    if runs["using"] == "composite":
        found["uses"] = sorted(
            str(step["uses"]) for step in runs.get("steps", []) if "uses" in step
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("command", choices=["check", "update"])
    args = parser.parse_args(argv)
    actual = {action: entry(action, version) for action, version in sorted(used().items())}
    if args.command == "update":
        RECORD.write_text(json.dumps(actual, indent=2) + "\n")
        return 0
    record = load()
    wrong = [a for a in sorted(set(record) | set(actual)) if record.get(a) != actual.get(a)]
    for action in wrong:
        print(
            f"{action}: recorded {record.get(action)}, read {actual.get(action)}", file=sys.stderr
        )
    unsupported = [a for a, e in actual.items() if not runtime_supported(e["using"])]
    for action in unsupported:
        print(
            f"{action}: runs on {actual[action]['using']}, gone from GitHub's runners",
            file=sys.stderr,
        )
    return 1 if wrong or unsupported else 0


if __name__ == "__main__":
    sys.exit(main())
