"""`make run`: the local control plane, the three operators and their samples, until Ctrl-C.

Brings up the local plane (hack/localplane.py up builds what it lacks first), installs the CRDs
and PodDebugger's authorization admission policy, under a name of its own and bound to the demo
namespace only (the operator's security gate stays on, as in a cluster, and nothing of the demo
stands in the way of the charts' own policies or of the tests' namespaces), starts every
operator as a local process (text logs prefixed with its name), applies the samples to the
namespace ``opsuite-demo``, waits until every sample is Ready and prints what to look at.
Ctrl-C removes the demo (its samples, with the operators still running so that they clean up
after them, the namespace, then the policy) and stops the operators (SIGTERM, as in a pod):
what `make test` or a chart installs next finds none of it. The plane keeps running until
`make cluster-down`.

``--until-ready`` stops the operators and exits once the samples are Ready (how .ci/run proves
the first command). ``--use-kubeconfig`` runs against the cluster of $KUBECONFIG instead of the
local plane, after saying what it will change there and asking (``--yes`` answers for you).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import yaml

from opsuite_packaging import operators as operator_list
from poddebugger_operator.gate import LOAD_GRACE
from poddebugger_operator.policy import POLICY_NAME, admission_policy

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
LOCAL_KUBECONFIG = ROOT / ".local" / "kubeconfig"
DEMO_NAMESPACE = "opsuite-demo"
REAL_NODE = "opsuite.dev/real-node"
READY_TIMEOUT = 300
"""Seconds the samples have to become Ready (the pods start on the real node)."""


DEMO_POLICY = f"{DEMO_NAMESPACE}.{POLICY_NAME}"
"""PodDebugger's authorization policy as `make run` installs it: not the chart's name (a Helm
install of the chart owns that one), bound to the demo namespace only."""


@dataclass(frozen=True)
class Operator:
    """An operator of this repo as `make run` starts it."""

    name: str
    directory: str
    chart: str
    metrics_port: int
    health_port: int
    flags: tuple[str, ...] = ()


FLAGS = {
    "poddebugger": (f"--admission-policy-name={DEMO_POLICY}",),
    "configmapsync": ("--secrets",),
}
"""Flags of an operator's own for the demo: PodDebugger's policy is the demo's; ConfigMapSync
serves the SecretSync sample too (the chart's secrets.enabled)."""
FIRST_PORT = 18080
"""The metrics port of the first operator; its probes take the next, and so on down the list."""

OPERATORS = tuple(
    Operator(
        op.image,
        op.name,
        op.image,
        FIRST_PORT + 2 * index,
        FIRST_PORT + 2 * index + 1,
        FLAGS.get(op.name, ()),
    )
    for index, op in enumerate(operator_list.OPERATORS)
)

PLAN = """\
make run: the local control plane on this machine, then the three operators with their samples.
  1. build what the plane runs, where missing: Kubernetes, etcd, containerd, runc, kwok, CoreDNS
     and a registry from their pinned Go modules, and the pods' images (a first run on 2 cores:
     about {cold}; later runs skip it)
  2. start the plane (as root: `make doctor` listed what it changes here; `make cluster-down`
     undoes it) and wait for its nodes
  3. install the CRDs and PodDebugger's admission policy, start the operators on this machine,
     apply the samples to the namespace {namespace}, and wait until they are Ready
"""
COLD_BUILD = "15 minutes"
"""A cold step 1 on 2 cores, as measured for the README's Quick start."""

EXTERNAL = """\
make run --use-kubeconfig: the operators against the cluster of KUBECONFIG={config}
  context {context}, server {server}
It will change that cluster:
  - create or update the CRDs {crds}
  - create or update the ValidatingAdmissionPolicy {policy} and its binding, which binds it to
    the namespace {namespace} only (there, only those who may patch pods/ephemeralcontainers
    may create a PodDebugger; the operator acts on no PodDebugger elsewhere)
  - create the namespace {namespace} and the samples in it
and run the three operators on this machine with YOUR credentials, over every namespace: PodSets
create pods, ConfigMapSyncs copy ConfigMaps whose owners consented, PodDebuggers add debug
containers to the pods they select. When they stop, the samples, the namespace {namespace} and
that policy are removed; the CRDs stay.
"""


def kubectl_binary(local: bool) -> str:
    """The plane's kubectl, or for another cluster the one on PATH (else the plane's)."""
    built = ROOT / ".local" / "bin" / "kubectl"
    if local:
        return str(built)
    found = shutil.which("kubectl") or (str(built) if built.exists() else None)
    if found is None:
        sys.exit("kubectl is needed: install it, or build it with `hack/build-tools.sh kubernetes`")
    return found


def as_list(objects: Sequence[dict[str, object]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


class Cluster:
    """kubectl against one cluster."""

    def __init__(self, config: str, kubectl: str) -> None:
        self.config = config
        self.exe = kubectl

    def run(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [self.exe, "--kubeconfig", self.config, *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def apply(self, objects: Sequence[dict[str, object]]) -> None:
        self.run("apply", "--server-side", "-f", "-", stdin=as_list(objects))


def local_plane() -> Cluster:
    configured = os.environ.get("KUBECONFIG")
    if configured and Path(configured).resolve() != LOCAL_KUBECONFIG:
        print(
            f"KUBECONFIG={configured} is left alone: make run uses the local plane. To run "
            'against that cluster: make run RUN_ARGS="--use-kubeconfig"',
            flush=True,
        )
    subprocess.run([sys.executable, str(ROOT / "hack" / "localplane.py"), "up"], check=True)
    return Cluster(str(LOCAL_KUBECONFIG), kubectl_binary(local=True))


def external_cluster(yes: bool) -> Cluster:
    """The cluster of $KUBECONFIG, once the user agreed to what will change there."""
    config = os.environ.get("KUBECONFIG")
    if not config:
        sys.exit("--use-kubeconfig needs KUBECONFIG set to the cluster's kubeconfig")
    cluster = Cluster(config, kubectl_binary(local=False))
    try:
        cluster.run("--request-timeout=10s", "get", "--raw", "/readyz")
        context = cluster.run("config", "current-context").strip()
        server = cluster.run("config", "view", "--minify", "-o", "jsonpath={..server}").strip()
    except RuntimeError as error:
        sys.exit(f"the cluster of KUBECONFIG={config} does not answer: {error}")
    print(
        EXTERNAL.format(
            config=config,
            context=context,
            server=server,
            crds=", ".join(sorted(crd_names())),
            policy=DEMO_POLICY,
            namespace=DEMO_NAMESPACE,
        ),
        flush=True,
    )
    if yes:
        return cluster
    if not sys.stdin.isatty():
        sys.exit("not asked on a terminal: add --yes to agree to the changes above")
    if input("Go on? [y/N] ").strip().lower() not in ("y", "yes"):
        sys.exit("nothing was changed")
    return cluster


def crd_files() -> list[Path]:
    return sorted(f for op in OPERATORS for f in (ROOT / "charts" / op.chart / "crds").glob("*"))


def crd_names() -> list[str]:
    return [str(yaml.safe_load(f.read_text())["metadata"]["name"]) for f in crd_files()]


def own_kind(op: operator_list.Operator) -> str:
    """The kind of the operator's own CRD (the first of its entry's), whose objects report
    Ready (PodDebugger's DebugImagePolicy does not)."""
    crd = yaml.safe_load((op.chart / "crds" / f"{op.crds[0]}.yaml").read_text())
    return str(crd["spec"]["names"]["kind"])


def demo_namespace(cluster: Cluster) -> dict[str, object]:
    """The demo namespace; on the local plane its pods all go to the real node (namespace
    annotations read by the PodNodeSelector and PodTolerationRestriction admission plugins),
    so the samples' pods really run."""
    real = cluster.run("get", "nodes", "-l", f"{REAL_NODE}=true", "-o", "name").strip()
    annotations = {
        "scheduler.alpha.kubernetes.io/node-selector": f"{REAL_NODE}=true",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps(
            [{"key": REAL_NODE, "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
        ),
    }
    metadata = {"name": DEMO_NAMESPACE, "annotations": annotations if real else {}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def demo_policy() -> list[dict[str, object]]:
    """PodDebugger's authorization policy and its binding, named :data:`DEMO_POLICY` and bound
    to the demo namespace."""
    policy, binding = admission_policy()
    policy["metadata"]["name"] = binding["metadata"]["name"] = DEMO_POLICY
    binding["spec"]["policyName"] = DEMO_POLICY
    demo = {"matchLabels": {"kubernetes.io/metadata.name": DEMO_NAMESPACE}}
    binding["spec"]["matchResources"] = {"namespaceSelector": demo}
    return [policy, binding]


def install(cluster: Cluster) -> None:
    """The CRDs, PodDebugger's admission policy and the demo namespace; then wait until the
    policy has been in force long enough for the operator's gate to trust PodDebuggers created
    from now on (poddebugger_operator.gate.LOAD_GRACE)."""
    for crd in crd_files():
        cluster.run("apply", "--server-side", "-f", str(crd))
    cluster.apply(demo_policy())
    cluster.apply([demo_namespace(cluster)])
    stamps = cluster.run(
        "get", "-f", "-", "-o", "jsonpath={.items[*].metadata.creationTimestamp}",
        stdin=as_list(demo_policy()),
    ).split()  # fmt: skip
    created = [datetime.fromisoformat(stamp.replace("Z", "+00:00")) for stamp in stamps]
    wait = (max(created) + LOAD_GRACE - datetime.now(UTC)).total_seconds() + 1
    if wait > 0:
        print(f"waiting {wait:.0f} s until the admission policy is surely in force", flush=True)
        time.sleep(wait)


def remove_demo(cluster: Cluster) -> None:
    """Delete the samples (the cluster-scoped DebugImagePolicy among them; waiting until the
    custom resources are gone, so that a chart installed next finds none), the demo namespace
    (its pods end in the background) and the policy."""
    print(f"removing the demo: its samples, namespace {DEMO_NAMESPACE}, policy {DEMO_POLICY}")
    try:
        for path, _ in samples():
            cluster.run("delete", "-n", DEMO_NAMESPACE, "-f", str(path), "--ignore-not-found")
        cluster.run("delete", "namespace", DEMO_NAMESPACE, "--ignore-not-found", "--wait=false")
        cluster.run("delete", "-f", "-", "--ignore-not-found", stdin=as_list(demo_policy()))
    except RuntimeError as error:
        print(f"make run: the demo was not removed: {error}", file=sys.stderr)


def _pump(name: str, stream: IO[str]) -> None:
    for line in stream:
        print(f"[{name}] {line}", end="", flush=True)


def start_operators(cluster: Cluster) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "KUBECONFIG": cluster.config}
    processes: list[subprocess.Popen[str]] = []
    for op in OPERATORS:
        proc = subprocess.Popen(
            [
                str(BIN / op.name),
                "--log-format=text",
                f"--metrics-bind-address=127.0.0.1:{op.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{op.health_port}",
                *op.flags,
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
    return processes


def samples() -> list[tuple[Path, dict[str, str]]]:
    """Every sample file, with the custom resources in it that report a Ready condition."""
    found = []
    for op in OPERATORS:
        for path in sorted((ROOT / "operators" / op.directory / "samples").glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            found.append((path, {"kind": doc["kind"], "name": doc["metadata"]["name"]}))
    return found


def wait_ready(cluster: Cluster, processes: Sequence[subprocess.Popen[str]]) -> None:
    """Until every sample of the operators' own kinds is Ready; fail as soon as an operator
    exits."""
    kinds = {own_kind(op) for op in operator_list.OPERATORS}
    names = [f"{s['kind'].lower()}/{s['name']}" for _, s in samples() if s["kind"] in kinds]
    print(f"waiting until {', '.join(names)} are Ready", flush=True)
    waiting = subprocess.Popen(
        [cluster.exe, "--kubeconfig", cluster.config, "wait", "-n", DEMO_NAMESPACE,
         "--for=condition=Ready", f"--timeout={READY_TIMEOUT}s", *names],
        text=True,
    )  # fmt: skip
    while waiting.poll() is None:
        if any(p.poll() is not None for p in processes):
            waiting.kill()
            raise RuntimeError("an operator exited before the samples were Ready")
        time.sleep(0.5)
    if waiting.returncode != 0:
        raise RuntimeError(f"the samples were not Ready within {READY_TIMEOUT} s")


def guide(cluster: Cluster) -> str:
    return (
        "\nopsuite is running, every sample Ready. Try:\n"
        f"  export KUBECONFIG={cluster.config}\n"
        f"  kubectl get opsuite -n {DEMO_NAMESPACE}          # every opsuite resource\n"
        f"  kubectl get pods -n {DEMO_NAMESPACE} -o wide\n"
        f"  kubectl scale pset/busybox-sleepers -n {DEMO_NAMESPACE} --replicas=5\n"
        "  kubectl create namespace team-a\n"
        "  kubectl label namespace team-a opsuite.dev/shared-settings=true   # selected\n"
        f"  kubectl annotate namespace team-a sync.opsuite.dev/accept-from={DEMO_NAMESPACE}"
        "   # and consenting\n"
        "  kubectl get configmap shared-settings -n team-a   # copied by ConfigMapSync\n"
        "  kubectl label namespace team-a opsuite.dev/registry-pull=true\n"
        "  kubectl get secret registry-pull -n team-a   # copied by SecretSync, its type kept\n"
        f"  kubectl label pods -n {DEMO_NAMESPACE} -l app=busybox-sleepers opsuite.dev/debug=true\n"
        f"  kubectl get pdbg -n {DEMO_NAMESPACE}   # PodDebugger adds its container to those pods\n"
        + "".join(
            f"  curl -s 127.0.0.1:{op.metrics_port}/metrics | grep reconcile_total  # {op.name}\n"
            f"  curl -s '127.0.0.1:{op.health_port}/readyz?verbose'\n"
            for op in OPERATORS
        )
        + "Ctrl-C removes the demo and stops the operators; `make cluster-down` stops the local "
        "plane and removes what it made on this machine.\n"
    )


def stop(processes: Sequence[subprocess.Popen[str]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--until-ready", action="store_true", help="exit once the samples are Ready"
    )
    parser.add_argument(
        "--use-kubeconfig", action="store_true", help="run against $KUBECONFIG's cluster"
    )
    parser.add_argument("--yes", action="store_true", help="with --use-kubeconfig: do not ask")
    args = parser.parse_args(argv)
    # SIGTERM or a closed terminal ends the run as Ctrl-C does: the operators run in sessions
    # of their own and would outlive this process otherwise.
    for ending in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, _interrupt)
    if args.use_kubeconfig:
        cluster = external_cluster(args.yes)
    else:
        print(PLAN.format(cold=COLD_BUILD, namespace=DEMO_NAMESPACE), flush=True)
        try:
            cluster = local_plane()
        except subprocess.CalledProcessError:
            print("make run failed: the local plane did not come up (above: why)", file=sys.stderr)
            return 1
    local = not args.use_kubeconfig
    processes: list[subprocess.Popen[str]] = []
    try:
        install(cluster)
        processes = start_operators(cluster)
        for path, _ in samples():
            cluster.run("apply", "-n", DEMO_NAMESPACE, "-f", str(path))
        wait_ready(cluster, processes)
        print(guide(cluster), flush=True)
        if args.until_ready:
            return 0
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        print("an operator exited; stopping the others", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping the operators", flush=True)
        return 0
    except RuntimeError as error:
        left = "; the local plane keeps running (`make cluster-down` stops it)" if local else ""
        print(f"make run failed: {error}{left}", file=sys.stderr)
        return 1
    finally:
        remove_demo(cluster)
        stop(processes)


if __name__ == "__main__":
    sys.exit(main())
