"""``helm test`` for an opsuite chart: every running operator pod answers ``/readyz`` with 200
and the chart's CRD is Established.

``make manifests`` copies this file into each chart (``files/helm_test.py``); the chart's test
Pod runs it with ``python -c`` in the operator's own image, so that the check needs no other
image and works with any release of it (the standard library and the kubernetes client only).
It reads what its own ServiceAccount may: the release namespace's pods and the one CRD.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client, config


def readyz(ip: str, port: int) -> str:
    """``""`` when ``http://ip:port/readyz`` answers 200, else what went wrong."""
    try:
        with urllib.request.urlopen(f"http://{ip}:{port}/readyz", timeout=5) as response:
            return "" if response.status == 200 else f"HTTP {response.status}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"
    except OSError as error:
        return str(error)


def problems(
    pods: Sequence[Any], crd: Any, probe: Callable[[str, int], str], port: int
) -> list[str]:
    """What keeps the release from passing: no running operator pod, a pod whose /readyz is
    not 200, a CRD that is not Established."""
    found = []
    running = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip]
    if not running:
        found.append("no running operator pod")
    for pod in running:
        error = probe(pod.status.pod_ip, port)
        if error:
            found.append(f"pod {pod.metadata.name}: /readyz: {error}")
    conditions = (crd.status.conditions if crd.status else None) or []
    if not any(c.type == "Established" and c.status == "True" for c in conditions):
        found.append(f"CRD {crd.metadata.name} is not Established")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", required=True, help="the operator pods' labels")
    parser.add_argument("--crd", required=True)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args(argv)
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    core, extensions = client.CoreV1Api(), client.ApiextensionsV1Api()
    deadline = time.monotonic() + args.timeout
    while True:
        pods = core.list_namespaced_pod(args.namespace, label_selector=args.selector).items
        crd = extensions.read_custom_resource_definition(args.crd)
        found = problems(pods, crd, readyz, args.port)
        if not found:
            print(f"ok: {len(pods)} operator pod(s) ready, CRD {args.crd} Established")
            return 0
        if time.monotonic() > deadline:
            print("\n".join(found), file=sys.stderr)
            return 1
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
