"""What every benchmark's ``main`` does around its run: bring the local plane up, take the
environment and the duration, turn an interruption or an error into an exit status, and write
the JSON document."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from bench import plane

T = TypeVar("T")
Environment = Callable[[str, tuple[float, ...]], dict[str, Any]]
"""bench.__main__.environment: (Kubernetes version, load average before) -> the environment."""


class Failed(Exception):
    """A run that ended early; ``code`` is the exit status (130 interrupted, 2 an error)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def measure(
    run: Callable[[client.ApiClient], T],
    environment: Environment,
    failure: str,
    *,
    fake_nodes: int | None = None,
) -> tuple[T, dict[str, Any]]:
    """Bring the local plane up (with ``fake_nodes``) and ``run`` on it: (what ``run``
    returned, the environment with the run's ``duration_s``). Raises :class:`Failed`: 130 when
    interrupted, 2 on an error (its traceback and ``failure`` printed)."""
    try:
        plane.ensure_up(fake_nodes=fake_nodes)
        api = plane.api_client()
        load_before = os.getloadavg()
        started = time.monotonic()
        outcome = run(api)
        env = environment(plane.server_version(api), load_before)
        env["duration_s"] = round(time.monotonic() - started, 1)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        raise Failed(130) from None
    except Exception:
        traceback.print_exc()
        print(failure, file=sys.stderr)
        raise Failed(2) from None
    return outcome, env


def write_document(output: Path, document: dict[str, Any], *, strict: bool) -> int:
    """Write the benchmark's JSON ``document``; the exit status: 1 when ``strict`` and a target
    was missed (``document["targets_met"]`` false), else 0."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"\nwritten to {output}")
    return 1 if strict and not document["targets_met"] else 0
