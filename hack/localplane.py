#!/usr/bin/env python3
"""A real Kubernetes control plane as local processes on this machine, without Docker.

Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (fake nodes for scale
work: their pods are scheduled and go Running, but nothing runs), one real node (containerd,
runc, kubelet and kube-proxy: hack/node.py), CoreDNS (the real node's cluster DNS, on the node
address) and a registry (distribution, on the loopback address; the real node's containerd
takes ghcr.io images from it) from the binaries hack/build-tools.sh links into .local/bin, and
writes an admin kubeconfig to .local/kubeconfig. Everything else lives in
.local/plane/ (certificates, data, logs, the PIDs of what was started); the audit log is
.local/audit.log. The API server listens on every address and advertises the real node's
(10.244.0.1), which pods reach it through.

    hack/localplane.py up        build what it runs when missing, start (no-op when already
                                 running), wait until usable; a failed start of a plane that
                                 was not running stops what it started
    hack/localplane.py down      stop exactly the recorded processes, remove the data and
                                 everything the real node made; fail if anything is left
    hack/localplane.py status    print the recorded processes and whether they are alive
    hack/localplane.py load ARCHIVE...   import OCI image archives into the real node
    hack/localplane.py registry  print the registry's host:port (hack/oci_push.py pushes there)

One component at a time (fault injection; the PID file follows every restart):

    hack/localplane.py stop <component> [--signal KILL]   signal it, wait until it is gone
    hack/localplane.py start <component>                  start it again with its recorded
                                                          arguments, wait until it serves
    hack/localplane.py restart <component> [--signal KILL]
    hack/localplane.py pause|resume <component>           SIGSTOP / SIGCONT

Only the standard library and the openssl command are used, so it runs before any virtualenv.

Length: one job, the plane's processes: ``up``'s steps in order (:func:`start_plane`, each
starting one component with its flags and waiting for what the next needs), the PID file, and
the commands that stop, restart and inspect them. What is not about processes lives beside it:
the certificates and kubeconfigs (plane_pki.py), the configuration files and manifests
(plane_config.py), the real node's files and flags (node.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import node
from plane_config import (
    AUDIT_POLICY,
    COREDNS_RBAC,
    fake_nodes_manifest,
    registry_config,
    scheduler_config,
)
from plane_pki import make_pki, write_kubeconfig

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
BIN = LOCAL / "bin"
PLANE = LOCAL / "plane"
PKI = PLANE / "pki"
LOGS = PLANE / "logs"
STATE = PLANE / "processes.json"
KUBECONFIG = LOCAL / "kubeconfig"
AUDIT_LOG = LOCAL / "audit.log"
IMAGES = LOCAL / "images" / "images.json"
OPERATOR_IMAGES = ("opsuite.local/", "docker.io/opsuite.local/")
"""Names of images hack/images.py builds for the charts, not for workload pods."""

HOST = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
FAKE_NODES = int(os.environ.get("OPSUITE_PLANE_FAKE_NODES", "3"))
"""Fake nodes; `up` on a running plane adds the missing ones (the scale benchmark needs 4)."""


@dataclass(frozen=True)
class Ports:
    """TCP ports of the components; overridable with OPSUITE_PLANE_PORT_BASE."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    registry: int
    node: node.NodePorts

    @classmethod
    def from_env(cls) -> Ports:
        base = int(os.environ.get("OPSUITE_PLANE_PORT_BASE", "36400"))
        node_ports = node.NodePorts(base + 50, base + 48, base + 56, base + 49)
        registry = base + 61
        return cls(base, base + 1, base + 43, base + 57, base + 59, base + 47, registry, node_ports)


def log(msg: str) -> None:
    print(f"[localplane] {msg}", flush=True)


# ---------------------------------------------------------------- processes


def read_state() -> dict[str, dict[str, object]]:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def alive(pid: int, binary: str) -> bool:
    """True when pid is running the given binary (guards against recycled PIDs)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return Path(cmdline).name == binary


def recorded_alive(entry: dict[str, object]) -> bool:
    """True when the process a PID file records (its pid and binary) still runs."""
    return alive(int(str(entry["pid"])), str(entry["binary"]))


def start(name: str, binary: str, args: list[str], env: dict[str, str] | None = None) -> None:
    """Start one component detached from this process, logging to .local/plane/logs; ``env``
    is added to this process's environment (and recorded, for ``start <component>``)."""
    exe = BIN / binary
    if not exe.exists():
        sys.exit(f"{exe} is missing: run hack/build-tools.sh (make tools) first")
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(
            [str(exe.resolve()), *args],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=PLANE,
            env={**os.environ, **(env or {})},
        )
    state = read_state()
    state[name] = {"pid": proc.pid, "binary": exe.resolve().name, "args": args, "env": env or {}}
    STATE.write_text(json.dumps(state, indent=2) + "\n")


def stop(name: str, entry: dict[str, object], sig: int = signal.SIGTERM) -> None:
    pid, binary = int(str(entry["pid"])), str(entry["binary"])
    if not alive(pid, binary):
        return
    os.kill(pid, sig)
    deadline = time.monotonic() + 15
    while alive(pid, binary) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid, binary):
        os.kill(pid, signal.SIGKILL)
    log(f"stopped {name} (pid {pid})")


def wait_for(what: str, check: Callable[[], bool], timeout: float, logfile: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    tail = (LOGS / f"{logfile}.log").read_text(errors="replace").splitlines()[-30:]
    sys.exit(f"{what} not ready after {timeout:.0f} s; last log lines:\n" + "\n".join(tail))


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def socket_open(path: Path) -> bool:
    """True when something accepts connections on the unix socket ``path`` (a socket file left
    by a process that died, as after a reboot, exists but refuses them)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(0.5)
        return s.connect_ex(str(path)) == 0


def api_get(port: int, path: str) -> tuple[int, bytes]:
    """GET from the API server as admin; (status, body), status 0 when unreachable."""
    ctx = ssl.create_default_context(cafile=str(PKI / "ca.crt"))
    ctx.load_cert_chain(str(PKI / "admin.crt"), str(PKI / "admin.key"))
    try:
        with urllib.request.urlopen(f"https://{HOST}:{port}{path}", context=ctx, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ssl.SSLError):
        return 0, b""


def kubectl(*args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        [str(BIN / "kubectl"), "--kubeconfig", str(KUBECONFIG), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


# ---------------------------------------------------------------- commands


PLANE_TOOLS = ("etcd", "kwok", "kubernetes", "containerd", "runc", "registry", "coredns")
"""What hack/build-tools.sh builds for the plane (`up` builds them when they are missing)."""
WORKLOAD_IMAGES = ("busybox", "pause")
"""What hack/images.py builds for the plane's pods (the sandbox's pause among them)."""


def prepare() -> None:
    """Build what the plane runs, before anything starts: its tools from their pinned Go
    modules and its pods' images (each skipped when up to date, which takes seconds)."""
    log("building what the plane runs, where missing (README, Quick start: how long)")
    subprocess.run([str(ROOT / "hack" / "build-tools.sh"), *PLANE_TOOLS], check=True)
    images = [sys.executable, str(ROOT / "hack" / "images.py"), "build"]
    subprocess.run([*images, "--only", ",".join(WORKLOAD_IMAGES)], check=True)


def up() -> None:
    """Build what is missing, start every component that is not already running, then wait
    until usable. When it fails on a plane that was not running, it stops what it started
    and removes what it made (as ``down``), so a failed start leaves nothing behind."""
    prepare()
    if missing := node.preflight(BIN):
        sys.exit("this machine cannot run the real node; missing:\n  " + "\n  ".join(missing))
    fresh = not any(recorded_alive(e) for e in read_state().values())
    try:
        start_plane()
    except BaseException:
        if not fresh:
            log("start failed on a plane that was partly running: `make cluster-down` stops it")
            raise
        log("start failed: stopping what it started")
        try:
            down()
        except SystemExit as left:
            log(f"{left}")
        raise


def start_plane() -> None:
    """Start, in order, every component that is not already running, each step waiting until
    what it started serves (the next needs it), then wait until the plane is usable: every node
    Ready and the default ServiceAccount made."""
    ports = Ports.from_env()
    claim_node()
    PLANE.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    node.make_bridge()
    write_plane_files(ports)
    running = already_running()
    start_etcd(ports, running)
    start_apiserver(ports, running)
    start_controller_manager(ports, running)
    start_scheduler(ports, running)
    start_kwok(ports, running)
    add_fake_nodes()
    node_start = time.monotonic()
    start_node(ports, running)
    wait_for("nodes Ready (kwok's and the real one)", _nodes_ready, 120, "kubelet")
    log(f"nodes Ready {time.monotonic() - node_start:.1f} s after the real node's start")
    wait_for("default ServiceAccount", _has_default_sa, 60, "kube-controller-manager")
    log(f"control plane up in {time.monotonic() - began:.1f} s; KUBECONFIG={KUBECONFIG}")


CLIENTS = ("controller-manager", "scheduler", "kwok", "kubelet", "kube-proxy", "coredns")
"""The components that reach the API server with a kubeconfig of their own."""
CONTROLLER_FLAGS = (
    "--bind-address=127.0.0.1",
    "--leader-elect=false",
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
)
"""What kube-controller-manager and kube-scheduler share: one replica each, health and metrics
open to anyone on the loopback address."""


def write_plane_files(ports: Ports) -> None:
    """What the components read, before any starts: the certificates (kept when there), the
    audit policy, kube-scheduler's configuration, the admin's kubeconfig (.local/kubeconfig) and
    each client component's."""
    make_pki(PKI)
    (PLANE / "audit-policy.yaml").write_text(AUDIT_POLICY)
    (PLANE / "kube-scheduler.yaml").write_text(scheduler_config(PKI / "scheduler.kubeconfig"))
    server = f"https://{HOST}:{ports.apiserver}"
    write_kubeconfig(KUBECONFIG, PKI, "admin", server)
    for component in CLIENTS:
        write_kubeconfig(PKI / f"{component}.kubeconfig", PKI, component, server)


def already_running() -> Callable[[str], bool]:
    """Whether a component ran before this start (the PID file read once, now): the steps leave
    those alone."""
    state = read_state()
    return lambda name: bool(state.get(name)) and recorded_alive(state[name])


def start_etcd(ports: Ports, running: Callable[[str], bool]) -> None:
    """etcd, its data in the plane (no fsync: the data goes with the plane); waits for its
    client port."""
    if running("etcd"):
        return
    start(
        "etcd",
        "etcd",
        [
            "--name=opsuite",
            f"--data-dir={PLANE / 'etcd'}",
            f"--listen-client-urls=http://{HOST}:{ports.etcd_client}",
            f"--advertise-client-urls=http://{HOST}:{ports.etcd_client}",
            f"--listen-peer-urls=http://{HOST}:{ports.etcd_peer}",
            f"--initial-advertise-peer-urls=http://{HOST}:{ports.etcd_peer}",
            f"--initial-cluster=opsuite=http://{HOST}:{ports.etcd_peer}",
            "--unsafe-no-fsync=true",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=1",
            "--quota-backend-bytes=8589934592",
            "--listen-metrics-urls=",
            "--log-level=warn",
        ],
    )
    wait_for_etcd(ports)


def wait_for_etcd(ports: Ports) -> None:
    wait_for("etcd", lambda: port_open(ports.etcd_client), 30, "etcd")


def start_apiserver(ports: Ports, running: Callable[[str], bool]) -> None:
    """kube-apiserver on every address, advertising the real node's; waits for /readyz."""
    if running("kube-apiserver"):
        return
    start(
        "kube-apiserver",
        "kube-apiserver",
        [
            f"--etcd-servers=http://{HOST}:{ports.etcd_client}",
            "--bind-address=0.0.0.0",
            f"--advertise-address={node.NODE_IP}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={PKI / 'apiserver.crt'}",
            f"--tls-private-key-file={PKI / 'apiserver.key'}",
            f"--client-ca-file={PKI / 'ca.crt'}",
            f"--requestheader-client-ca-file={PKI / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={PKI / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={PKI / 'front-proxy-client.key'}",
            f"--kubelet-client-certificate={PKI / 'admin.crt'}",
            f"--kubelet-client-key={PKI / 'admin.key'}",
            f"--service-account-key-file={PKI / 'sa.pub'}",
            f"--service-account-signing-key-file={PKI / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            # A namespace can send all its pods to the real node (make run's demo does):
            # scheduler.alpha.kubernetes.io/node-selector and .../defaultTolerations.
            # OwnerReferencesPermissionEnforcement, as OpenShift runs it: an object that
            # names an owner with blockOwnerDeletion needs update on its finalizers.
            "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction,"
            "OwnerReferencesPermissionEnforcement",
            "--allow-privileged=true",
            f"--audit-policy-file={PLANE / 'audit-policy.yaml'}",
            f"--audit-log-path={AUDIT_LOG}",
            "--audit-log-format=json",
            "--audit-log-maxsize=200",
            "--audit-log-maxbackup=2",
            "--audit-log-mode=batch",
            "--audit-log-batch-max-wait=1s",
            "--v=1",
        ],
    )
    wait_for_apiserver(ports)


def wait_for_apiserver(ports: Ports) -> None:
    wait_for(
        "kube-apiserver",
        lambda: api_get(ports.apiserver, "/readyz")[0] == 200,
        90,
        "kube-apiserver",
    )


def start_controller_manager(ports: Ports, running: Callable[[str], bool]) -> None:
    """kube-controller-manager (no node IPAM, no cloud controllers); not waited for: the default
    ServiceAccount it makes is, at the end."""
    if running("kube-controller-manager"):
        return
    kcm_kc = str(PKI / "controller-manager.kubeconfig")
    start(
        "kube-controller-manager",
        "kube-controller-manager",
        [
            *CONTROLLER_FLAGS,
            f"--kubeconfig={kcm_kc}",
            f"--authentication-kubeconfig={kcm_kc}",
            f"--authorization-kubeconfig={kcm_kc}",
            f"--secure-port={ports.controller_manager}",
            f"--root-ca-file={PKI / 'ca.crt'}",
            f"--service-account-private-key-file={PKI / 'sa.key'}",
            f"--cluster-signing-cert-file={PKI / 'ca.crt'}",
            f"--cluster-signing-key-file={PKI / 'ca.key'}",
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle",
            "--kube-api-qps=100",
            "--kube-api-burst=200",
            "--v=1",
        ],
    )


def start_scheduler(ports: Ports, running: Callable[[str], bool]) -> None:
    """kube-scheduler with the plane's configuration file; not waited for: the nodes' pods
    are, later."""
    if running("kube-scheduler"):
        return
    sched_kc = str(PKI / "scheduler.kubeconfig")
    start(
        "kube-scheduler",
        "kube-scheduler",
        [
            *CONTROLLER_FLAGS,
            f"--config={PLANE / 'kube-scheduler.yaml'}",
            f"--authentication-kubeconfig={sched_kc}",
            f"--authorization-kubeconfig={sched_kc}",
            f"--secure-port={ports.scheduler}",
            "--v=1",
        ],
    )


def start_kwok(ports: Ports, running: Callable[[str], bool]) -> None:
    """kwok, faking the nodes annotated ``kwok.x-k8s.io/node=fake`` and their pods; not waited
    for: the fake nodes' Ready is, at the end."""
    if running("kwok"):
        return
    stages = (BIN / "kwok").resolve().parent / "kwok-stages.yaml"
    start(
        "kwok",
        "kwok",
        [
            f"--kubeconfig={PKI / 'kwok.kubeconfig'}",
            f"--config={stages}",
            f"--config={ROOT / 'hack' / 'kwok' / 'ephemeral-containers-running.yaml'}",
            f"--config={ROOT / 'hack' / 'kwok' / 'kwok-configuration.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--node-ip={HOST}",
            f"--node-port={ports.kwok}",
            f"--server-address={HOST}:{ports.kwok}",
            f"--tls-cert-file={PKI / 'kwok-serving.crt'}",
            f"--tls-private-key-file={PKI / 'kwok-serving.key'}",
            "--node-lease-duration-seconds=40",
            "--v=1",
        ],
    )


def _nodes_ready() -> bool:
    try:
        out = kubectl(
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
        )
    except RuntimeError:
        return False
    statuses = out.split()
    return len(statuses) >= FAKE_NODES + 1 and all(s == "True" for s in statuses)


def plane_running(plane: Path) -> bool:
    """True when a process recorded in ``plane``'s processes.json still runs."""
    try:
        state = json.loads((plane / STATE.name).read_text())
    except (OSError, ValueError):
        return False
    return any(recorded_alive(e) for e in state.values())


def claim_node() -> None:
    """Make the real node this plane's: clear one left by a plane that no longer runs (its
    directory gone, or none of its processes alive, as after a reboot); refuse when another
    plane runs (one real node per machine)."""
    holder = node.owner()
    if holder not in (None, PLANE):
        if plane_running(holder):
            sys.exit(
                f"the real node belongs to the plane in {holder}: run `make cluster-down` there"
            )
        log(f"clearing the real node left by {holder} (that plane no longer runs)")
        node.teardown(BIN, holder)
    node.claim(PLANE)


def add_fake_nodes() -> None:
    """kwok's fake nodes, applied server-side: on a running plane, the missing ones are added."""
    manifest = fake_nodes_manifest(FAKE_NODES)
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest)


def start_node(ports: Ports, running: Callable[[str], bool]) -> None:
    """containerd, then the kubelet and kube-proxy of the real node (hack/node.py)."""
    node.write_files(PLANE, PKI / "ca.crt", ports.node, f"{HOST}:{ports.registry}")
    if not running("containerd"):
        start(
            "containerd",
            "containerd",
            [f"--config={node.STATE_DIR / 'containerd.toml'}", "--log-level=warn"],
            env=node.containerd_env(BIN),
        )
        wait_for("containerd", lambda: socket_open(node.SOCKET), 30, "containerd")
        load(workload_images())
    if not running("registry"):
        config = registry_config(f"{HOST}:{ports.registry}", PLANE / "registry")
        (PLANE / "registry.yaml").write_text(config)
        start("registry", "registry", ["serve", str(PLANE / "registry.yaml")])
        wait_for("registry", lambda: port_open(ports.registry), 30, "registry")
    if not running("coredns"):
        kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=COREDNS_RBAC)
        start("coredns", "coredns", [f"-conf={PLANE / 'Corefile'}"])
        wait_for("coredns", lambda: port_open(node.DNS_PORT, node.NODE_IP), 30, "coredns")
    if not running("kubelet"):
        start("kubelet", "kubelet", node.kubelet_args(PLANE))
    if not running("kube-proxy"):
        start("kube-proxy", "kube-proxy", [f"--config={PLANE / 'kube-proxy.yaml'}", "--v=1"])


def workload_images() -> list[Path]:
    """The archives of the images pods use (the sandbox's pause, busybox, ...), which
    hack/images.py built; the operators' own images are loaded by hack/e2e-in-cluster.sh."""
    listed = json.loads(IMAGES.read_text())
    archives = {i["archive"] for i in listed if not i["name"].startswith(OPERATOR_IMAGES)}
    if not any(i["name"] == node.SANDBOX_IMAGE for i in listed):
        sys.exit(f"{IMAGES} has no {node.SANDBOX_IMAGE}: run `make images`")
    return sorted(Path(a) for a in archives)


def load(archives: list[Path]) -> None:
    """Import OCI image archives into the real node's containerd, named as their index says."""
    for archive in archives:
        imported = subprocess.run(
            [
                str(BIN / "ctr"),
                f"--address={node.SOCKET}",
                "--namespace=k8s.io",
                "images",
                "import",
                str(archive),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,  # ctr warns of cgroup v1 on every call
            text=True,
        )
        if imported.returncode != 0:
            sys.exit(f"importing {archive} into the real node failed:\n{imported.stderr}")
        log(f"loaded {archive.name}")


def _has_default_sa() -> bool:
    try:
        kubectl("get", "serviceaccount", "default", "-n", "default")
    except RuntimeError:
        return False
    return True


def down() -> None:
    """Stop exactly the recorded processes (reverse start order) and remove the data."""
    state = read_state()
    for name in reversed(list(state)):
        stop(name, state[name])
    if node.owner() == PLANE:
        node.teardown(BIN, PLANE)
    if PLANE.exists():
        subprocess.run(["rm", "-rf", str(PLANE)], check=True)
    for p in (KUBECONFIG, AUDIT_LOG):
        p.unlink(missing_ok=True)
    for old in LOCAL.glob("audit-*.log"):
        old.unlink()
    if node.owner() in (None, PLANE) and (left := node.leftovers()):
        sys.exit("cluster-down left these behind:\n  " + "\n  ".join(left))
    log("control plane stopped and data removed")


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process in MiB, None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def status() -> int:
    """Print each recorded process with its state and resident memory."""
    state = read_state()
    if not state:
        print("not running")
        return 1
    ok = True
    for name, e in state.items():
        pid = int(str(e["pid"]))
        up_ = alive(pid, str(e["binary"]))
        ok &= up_
        rss = rss_mib(pid) if up_ else None
        memory = f"{rss:7.1f} MiB RSS" if rss is not None else ""
        print(f"{name:26} pid {pid:>8}  {'running' if up_ else 'DEAD':8} {memory}")
    return 0 if ok else 1


def _entry(name: str) -> dict[str, object]:
    entry = read_state().get(name)
    if entry is None:
        sys.exit(f"{name} is not a recorded component: {', '.join(read_state()) or 'none'}")
    return entry


def stop_component(name: str, sig: int) -> None:
    """Send ``sig`` to one component and wait until it has exited (SIGKILL after 15 s)."""
    entry = _entry(name)
    if not recorded_alive(entry):
        sys.exit(f"{name} is not running")
    stop(name, entry, sig)


def start_component(name: str) -> None:
    """Start one stopped component with its recorded arguments; wait until it serves."""
    entry = _entry(name)
    if recorded_alive(entry):
        sys.exit(f"{name} is already running (pid {entry['pid']})")
    args = [str(a) for a in entry["args"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in dict(entry.get("env") or {}).items()}  # type: ignore[call-overload]
    start(name, str(entry["binary"]), args, env)
    if name == "etcd":
        wait_for_etcd(Ports.from_env())
    elif name == "kube-apiserver":
        wait_for_apiserver(Ports.from_env())
    log(f"started {name} (pid {read_state()[name]['pid']})")


def signal_component(name: str, sig: int) -> None:
    """Send ``sig`` (SIGSTOP, SIGCONT) to a running component."""
    entry = _entry(name)
    pid = int(str(entry["pid"]))
    if not alive(pid, str(entry["binary"])):
        sys.exit(f"{name} is not running")
    os.kill(pid, sig)
    log(f"sent {signal.Signals(sig).name} to {name} (pid {pid})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        choices=[
            *("up", "down", "status", "stop", "start", "restart", "pause", "resume", "load"),
            "registry",
        ],
    )
    parser.add_argument(
        "component", nargs="*", help="for stop/start/restart/pause/resume; load: archives"
    )
    parser.add_argument("--signal", default="TERM", help="stop/restart: TERM (default) or KILL")
    args = parser.parse_args()
    cmd = args.command
    if cmd == "up":
        up()
        return 0
    if cmd == "down":
        down()
        return 0
    if cmd == "status":
        return status()
    if cmd == "load":
        load([Path(a) for a in args.component])
        return 0
    if cmd == "registry":
        print(f"{HOST}:{Ports.from_env().registry}")
        return 0
    if len(args.component) != 1:
        parser.error(f"{cmd} needs one component")
    name = str(args.component[0])
    if cmd in ("stop", "restart"):
        stop_component(name, signal.Signals[f"SIG{args.signal.upper()}"])
    if cmd in ("start", "restart"):
        start_component(name)
    if cmd in ("pause", "resume"):
        signal_component(name, signal.SIGSTOP if cmd == "pause" else signal.SIGCONT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
