"""`make run`: the operators against a cluster, with their sample resources, until Ctrl-C.

Uses the cluster of $KUBECONFIG when it answers; otherwise builds the tools if needed and
brings up the local control plane. Installs the CRDs, starts every operator as a local process
(text logs prefixed with its name), applies the samples to the namespace ``opsuite-demo`` and
prints what to look at. Ctrl-C stops the operators (SIGTERM, as in a pod); the plane keeps
running until `make cluster-down`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
KUBECTL = ROOT / ".local" / "bin" / "kubectl"
DEMO_NAMESPACE = "opsuite-demo"
REAL_NODE = "opsuite.dev/real-node"


@dataclass(frozen=True)
class Operator:
    """An operator of this repo as `make run` starts it."""

    name: str
    directory: str
    chart: str
    metrics_port: int
    health_port: int


OPERATORS = (
    Operator("podset-operator", "podset", "podset-operator", 18080, 18081),
    Operator("configmapsync-operator", "configmapsync", "configmapsync-operator", 18082, 18083),
    Operator("pod-debugger-operator", "poddebugger", "pod-debugger-operator", 18084, 18085),
)


def kubeconfig() -> str:
    """A reachable cluster's kubeconfig: $KUBECONFIG if it answers, else the local plane's."""
    configured = os.environ.get("KUBECONFIG")
    if configured and _answers(configured):
        print(f"using the cluster of KUBECONFIG={configured}")
        return configured
    subprocess.run(
        [str(ROOT / "hack" / "build-tools.sh"), "etcd", "kwok", "kubernetes", "containerd", "runc"],
        check=True,
    )
    subprocess.run([sys.executable, str(ROOT / "hack" / "localplane.py"), "up"], check=True)
    return str(ROOT / ".local" / "kubeconfig")


def demo_namespace(config: str) -> dict[str, object]:
    """The demo namespace; on the local plane its pods all go to the real node (namespace
    annotations read by the PodNodeSelector and PodTolerationRestriction admission plugins),
    so the samples' pods really run."""
    real = subprocess.run(
        [
            str(KUBECTL),
            "--kubeconfig",
            config,
            "get",
            "nodes",
            "-l",
            f"{REAL_NODE}=true",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    annotations = {
        "scheduler.alpha.kubernetes.io/node-selector": f"{REAL_NODE}=true",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps(
            [{"key": REAL_NODE, "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
        ),
    }
    metadata = {"name": DEMO_NAMESPACE, "annotations": annotations if real else {}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def _answers(config: str) -> bool:
    exe = str(KUBECTL) if KUBECTL.exists() else "kubectl"
    try:
        probe = subprocess.run(
            [exe, "--kubeconfig", config, "--request-timeout=5s", "get", "--raw", "/readyz"],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        return False
    return probe.returncode == 0


def kubectl(config: str, *args: str) -> None:
    subprocess.run([str(KUBECTL), "--kubeconfig", config, *args], check=True)


def _pump(name: str, stream: IO[str]) -> None:
    for line in stream:
        print(f"[{name}] {line}", end="", flush=True)


def main() -> int:
    config = kubeconfig()
    for op in OPERATORS:
        kubectl(config, "apply", "--server-side", "-f", str(ROOT / "charts" / op.chart / "crds"))
    subprocess.run(
        [str(KUBECTL), "--kubeconfig", config, "apply", "-f", "-"],
        input=json.dumps(demo_namespace(config)),
        text=True,
        check=True,
    )
    # `make run` installs no admission policies: the PodDebugger operator opts out of needing
    # them (docs/poddebugger.md, "Fails closed"); the other operators ignore the variable.
    env = {**os.environ, "KUBECONFIG": config, "OPSUITE_ALLOW_WITHOUT_ADMISSION_POLICY": "true"}
    processes: list[subprocess.Popen[str]] = []
    for op in OPERATORS:
        proc = subprocess.Popen(
            [
                str(BIN / op.name),
                "--log-format=text",
                f"--metrics-bind-address=127.0.0.1:{op.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{op.health_port}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Ctrl-C reaches only this script, which then stops each operator with SIGTERM.
            start_new_session=True,
        )
        assert proc.stdout is not None
        threading.Thread(target=_pump, args=(op.name, proc.stdout), daemon=True).start()
        processes.append(proc)
    for op in OPERATORS:
        kubectl(
            config,
            "apply",
            "-n",
            DEMO_NAMESPACE,
            "-f",
            str(ROOT / "operators" / op.directory / "samples"),
        )
    print(
        "\nopsuite is running. Try:\n"
        f"  export KUBECONFIG={config}\n"
        f"  kubectl get opsuite -n {DEMO_NAMESPACE}          # every opsuite resource\n"
        f"  kubectl get pods -n {DEMO_NAMESPACE} -o wide\n"
        f"  kubectl scale pset/busybox-sleepers -n {DEMO_NAMESPACE} --replicas=5\n"
        "  kubectl create namespace team-a && "
        "kubectl label namespace team-a opsuite.dev/shared-settings=true\n"
        "  kubectl get configmap shared-settings -n team-a   # copied by ConfigMapSync\n"
        f"  kubectl label pods -n {DEMO_NAMESPACE} -l app=busybox-sleepers opsuite.dev/debug=true\n"
        f"  kubectl get pdbg -n {DEMO_NAMESPACE}   # PodDebugger adds its container to those pods\n"
        + "".join(
            f"  curl -s 127.0.0.1:{op.metrics_port}/metrics | grep reconcile_total  # {op.name}\n"
            f"  curl -s '127.0.0.1:{op.health_port}/readyz?verbose'\n"
            for op in OPERATORS
        )
        + "Ctrl-C stops the operators; `make cluster-down` stops the local plane.\n",
        flush=True,
    )
    try:
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        print("an operator exited; stopping the others", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping the operators", flush=True)
        return 0
    finally:
        for p in processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
