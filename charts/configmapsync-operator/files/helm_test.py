"""``helm test`` for an opsuite chart: every running operator pod answers ``/readyz`` with 200
and the chart's CRD is Established.

``make manifests`` copies this file into each chart (``files/helm_test.py``); the chart's test
Pod runs it with ``python -c`` in the operator's own image, so that the check needs no other
image and works with any release of it (the standard library only: the images ship no
Kubernetes client library). It reads, as its own ServiceAccount, what that may: the release
namespace's pods and the one CRD.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def api_get(path: str, query: dict[str, str] | None = None) -> Any:
    """GET ``path`` from the API server as the pod's ServiceAccount; the parsed JSON."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:
        host = f"[{host}]"
    url = f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    token = (SERVICE_ACCOUNT / "token").read_text().strip()
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read())


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
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP")
    ]
    if not running:
        found.append("no running operator pod")
    for pod in running:
        error = probe(pod["status"]["podIP"], port)
        if error:
            found.append(f"pod {pod['metadata']['name']}: /readyz: {error}")
    conditions = (crd.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
        found.append(f"CRD {crd['metadata']['name']} is not Established")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--selector", required=True, help="the operator pods' labels")
    parser.add_argument("--crd", required=True)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args(argv)
    pods_path = f"/api/v1/namespaces/{urllib.parse.quote(args.namespace)}/pods"
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{args.crd}"
    deadline = time.monotonic() + args.timeout
    while True:
        pods = api_get(pods_path, {"labelSelector": args.selector}).get("items") or []
        crd = api_get(crd_path)
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
