"""The local plane's real node: containerd, runc, a kubelet and kube-proxy on this machine.

hack/localplane.py starts the node after the control plane and stops it first. Pods land on it
only when they ask: it is registered with the taint ``opsuite.dev/real-node=true:NoSchedule`` and
the label ``opsuite.dev/real-node=true`` (e2e/placement.py), so the kwok nodes keep taking every
other pod. Its containers run for real: images come from OCI archives imported into containerd
(``hack/localplane.py load``), and any pull from a registry goes to a closed local port.

Only one real node runs per machine (its files live in system directories, because sockets and
overlay mounts do not belong in a work tree): ``/var/lib/opsuite-node`` and ``/run/opsuite-node``,
whose ``owner`` file names the plane directory that started it. Network: the bridge
``opsuite0`` with the node address 10.244.0.1/24, which is also the API server's advertised
address, so pods reach it through the ``kubernetes`` Service.

Two things of this machine kind need a workaround (../shared/REAL-NODE.md):
- no CAP_SYS_RESOURCE, so runc cannot lower ``oom_score_adj``: containerd runs ``runc`` through
  hack/node/runc-wrapper, which raises a container's ``oomScoreAdj`` to its own value;
- the kubelet refuses a loopback node IP: the bridge's address is the node's.

Only the standard library is used, as in hack/localplane.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NODE_NAME = "opsuite-node"
LABEL = "opsuite.dev/real-node"
TAINT = f"{LABEL}=true:NoSchedule"
BRIDGE = "opsuite0"
POD_CIDR = "10.244.0.0/24"
NODE_IP = "10.244.0.1"
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10.2"
CNI_BIN = Path("/usr/lib/cni")

STATE_DIR = Path("/var/lib/opsuite-node")
RUN_DIR = Path("/run/opsuite-node")
OWNER = RUN_DIR / "owner"
SOCKET = RUN_DIR / "containerd.sock"
RUNC_ROOT = RUN_DIR / "runc"
WRAPPER = Path(__file__).resolve().parent / "node" / "runc-wrapper"
CHAINS = ("KUBE-", "CNI-")
"""Prefixes of the iptables chains the kubelet, kube-proxy and the CNI plugins make."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTAINER_LOGS = Path("/var/log/containers")
"""The kubelet's symlinks to container logs: a fixed path, not configurable."""


@dataclass(frozen=True)
class NodePorts:
    """The kubelet's and kube-proxy's ports, next to the plane's."""

    kubelet: int
    kubelet_healthz: int
    proxy_healthz: int
    proxy_metrics: int


def preflight(bin_dir: Path) -> list[str]:
    """What this machine lacks to run containers; empty when it can."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (the kubelet, containerd and runc run as root)")
    for tool in ("containerd", "containerd-shim-runc-v2", "ctr", "runc", "kubelet", "kube-proxy"):
        if not (bin_dir / tool).exists():
            missing.append(f"{bin_dir / tool} (hack/build-tools.sh containerd runc kubernetes)")
    for plugin in ("bridge", "host-local", "loopback"):
        if not (CNI_BIN / plugin).exists():
            missing.append(f"CNI plugin {CNI_BIN / plugin} (Debian containernetworking-plugins)")
    for command in ("iptables", "ip6tables", "iptables-save", "iptables-restore", "ip"):
        if shutil.which(command) is None:
            missing.append(f"{command} (Debian iptables, iproute2)")
    if "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("the overlay filesystem (containerd's overlayfs snapshotter)")
    if not (CGROUP_ROOT / "cpu").exists() and not (CGROUP_ROOT / "cgroup.controllers").exists():
        missing.append(f"cgroups mounted at {CGROUP_ROOT}")
    return missing


def owner() -> Path | None:
    """The plane directory that runs the real node, if one does."""
    try:
        return Path(OWNER.read_text().strip())
    except OSError:
        return None


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless the file holds it (kube-proxy exits when its config changes)."""
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def _has_link(name: str) -> bool:
    return _run(["ip", "link", "show", name], check=False).returncode == 0


def make_bridge() -> None:
    """The pods' bridge with the node's address (the CNI bridge plugin then only adds veths)."""
    if not _has_link(BRIDGE):
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    if NODE_IP not in _run(["ip", "-4", "addr", "show", "dev", BRIDGE]).stdout:
        _run(["ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE])
    _run(["ip", "link", "set", BRIDGE, "up"])


def containerd_config() -> str:
    """containerd's configuration: its own root, state, socket, runc root and CNI directories."""
    return f"""\
version = 3
root = '{STATE_DIR / "containerd"}'
state = '{RUN_DIR / "containerd"}'
imports = []
[grpc]
  address = '{SOCKET}'
[ttrpc]
  address = '{SOCKET}.ttrpc'
[debug]
  address = ''
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{SANDBOX_IMAGE}'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '{STATE_DIR / "certs.d"}'
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{STATE_DIR / "bin" / "runc"}'
          Root = '{RUNC_ROOT}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{CNI_BIN}']
      conf_dir = '{STATE_DIR / "cni" / "net.d"}'
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
  [plugins.'io.containerd.internal.v1.opt']
    path = '{STATE_DIR / "opt"}'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
"""


def cni_config() -> str:
    """One bridge network; no masquerading and no host ports (nothing leaves the machine)."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "opsuite",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(STATE_DIR / "cni" / "ipam"),
                    },
                }
            ],
        },
        indent=2,
    )


CLOSED_REGISTRY = "http://127.0.0.1:9"
"""Where every image pull goes: nothing listens, so a pull fails at once instead of leaving."""


MIRRORED_REGISTRIES = ("ghcr.io",)
"""Registries the plane's own registry stands in for: the bundles, the catalog and the CSVs
name ghcr.io/opsuite images, which tests push there."""


def registry_hosts(server: str = CLOSED_REGISTRY) -> str:
    """containerd's hosts.toml sending a registry's pulls to ``server`` (by default nowhere)."""
    return f'server = "{server}"\n[host."{server}"]\n  capabilities = ["pull", "resolve"]\n'


CLUSTER_DOMAIN = "cluster.local"
DNS_PORT = 53
"""CoreDNS's port on the node address: resolv.conf has no port, so pods ask port 53."""


def corefile(kubeconfig: Path) -> str:
    """CoreDNS's configuration: the cluster's Services and pods on the node address (the
    kubelet's clusterDNS), everything else forwarded to the machine's resolver."""
    return f"""\
.:{DNS_PORT} {{
    bind {NODE_IP}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 30
    loop
}}
"""


def kubelet_config(ca: Path, ports: NodePorts) -> str:
    """The KubeletConfiguration (JSON is YAML)."""
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{SOCKET}",
            "address": NODE_IP,
            "port": ports.kubelet,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": ports.kubelet_healthz,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(ca)},
            },
            "authorization": {"mode": "Webhook"},
            "failSwapOn": False,
            "enforceNodeAllocatable": [],
            "podLogsDir": str(STATE_DIR / "pod-logs"),
            "registerWithTaints": [{"key": LABEL, "value": "true", "effect": "NoSchedule"}],
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%"},
            "maxPods": 110,
            "resolvConf": "/etc/resolv.conf",
            "clusterDNS": [NODE_IP],
            "clusterDomain": CLUSTER_DOMAIN,
        },
        indent=2,
    )


def kube_proxy_config(kubeconfig: Path, ports: NodePorts) -> str:
    """iptables mode, node ports on the node address only, no conntrack sysctls."""
    return json.dumps(
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "clusterCIDR": POD_CIDR,
            "healthzBindAddress": f"127.0.0.1:{ports.proxy_healthz}",
            "metricsBindAddress": f"127.0.0.1:{ports.proxy_metrics}",
            "nodePortAddresses": [f"{NODE_IP}/32"],
            "iptables": {"localhostNodePorts": False},
            "conntrack": {"maxPerCore": 0},
            "oomScoreAdj": 0,
        },
        indent=2,
    )


def claim(plane: Path) -> None:
    """Record ``plane`` as the node's owner, before anything of the node is made (the bridge
    first), so that its teardown finds everything even after a start that failed early."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    OWNER.write_text(f"{plane}\n")


def write_files(plane: Path, ca: Path, ports: NodePorts, registry: str) -> None:
    """Every file the node's processes read, rewritten only where it changed; ``registry`` is
    the plane's registry (host:port), which serves the MIRRORED_REGISTRIES."""
    runc_dir = STATE_DIR / "bin"
    runc_dir.mkdir(parents=True, exist_ok=True)
    # The shim runs the `runc` on its PATH for the sandbox, whatever BinaryName says: the
    # wrapper is that `runc`; it execs the real one named in OPSUITE_RUNC.
    link = runc_dir / "runc"
    if not link.is_symlink() or link.readlink() != WRAPPER:
        link.unlink(missing_ok=True)
        link.symlink_to(WRAPPER)
    write_if_changed(STATE_DIR / "containerd.toml", containerd_config())
    write_if_changed(STATE_DIR / "cni" / "net.d" / "10-opsuite.conflist", cni_config())
    write_if_changed(STATE_DIR / "certs.d" / "_default" / "hosts.toml", registry_hosts())
    for name in MIRRORED_REGISTRIES:
        hosts = registry_hosts(f"http://{registry}")
        write_if_changed(STATE_DIR / "certs.d" / name / "hosts.toml", hosts)
    write_if_changed(plane / "kubelet.yaml", kubelet_config(ca, ports))
    write_if_changed(plane / "Corefile", corefile(plane / "pki" / "coredns.kubeconfig"))
    write_if_changed(
        plane / "kube-proxy.yaml", kube_proxy_config(plane / "pki" / "kube-proxy.kubeconfig", ports)
    )


def containerd_env(bin_dir: Path) -> dict[str, str]:
    """containerd's environment: the wrapper's `runc` first on PATH, then the built tools."""
    system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    path = f"{STATE_DIR / 'bin'}:{bin_dir}:{system}"
    return {"PATH": path, "OPSUITE_RUNC": str((bin_dir / "runc").resolve())}


def kubelet_args(plane: Path) -> list[str]:
    """The kubelet's flags (everything else is in kubelet.yaml)."""
    return [
        f"--config={plane / 'kubelet.yaml'}",
        f"--kubeconfig={plane / 'pki' / 'kubelet.kubeconfig'}",
        f"--root-dir={STATE_DIR / 'kubelet'}",
        f"--cert-dir={STATE_DIR / 'kubelet-pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_IP}",
        f"--node-labels={LABEL}=true",
        "--v=1",
    ]


# ---------------------------------------------------------------- teardown


def _cmdline(pid: str) -> list[str]:
    """A process's arguments; empty for kernel threads, zombies and processes gone meanwhile."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def node_processes() -> list[int]:
    """PIDs of this node's containerd shims (found by their socket), whatever started them."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = _cmdline(entry.name)
        if args and Path(args[0]).name == "containerd-shim-runc-v2" and str(SOCKET) in args:
            pids.append(int(entry.name))
    return pids


def kill_containers(runc: Path) -> None:
    """SIGKILL every container runc knows under the node's root, then every shim."""
    for namespace_root in RUNC_ROOT.glob("*") if RUNC_ROOT.exists() else []:
        listed = _run([str(runc), "--root", str(namespace_root), "list", "-q"], check=False)
        for container in listed.stdout.split():
            _run([str(runc), "--root", str(namespace_root), "kill", container, "KILL"], check=False)
            _run(
                [str(runc), "--root", str(namespace_root), "delete", "--force", container],
                check=False,
            )
    for pid in node_processes():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while node_processes() and time.monotonic() < deadline:
        time.sleep(0.1)


def _mounts_under(roots: Iterable[Path]) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(r) or point.startswith(f"{r}/") for r in roots):
            found.append(point)
    return found


def unmount_all() -> None:
    """Unmount everything under the node's directories, deepest first."""
    for point in sorted(set(_mounts_under((STATE_DIR, RUN_DIR))), key=len, reverse=True):
        if _run(["umount", point], check=False).returncode != 0:
            _run(["umount", "-l", point], check=False)


def _iptables_chains(save: str) -> list[str]:
    dump = _run([save], check=False).stdout
    return [line for line in dump.splitlines() if any(p in line for p in CHAINS)]


def remove_iptables() -> None:
    """Restore each table without the chains and rules of the kubelet, kube-proxy and CNI."""
    for family in ("iptables", "ip6tables"):
        dump = _run([f"{family}-save"], check=False).stdout
        if not any(p in dump for p in CHAINS):
            continue
        kept = [line for line in dump.splitlines() if not any(p in line for p in CHAINS)]
        subprocess.run([f"{family}-restore"], input="\n".join(kept) + "\n", text=True, check=True)


def _cgroups() -> list[Path]:
    return sorted(CGROUP_ROOT.glob("*/kubepods*"), key=lambda p: len(p.parts))


def remove_cgroups() -> None:
    """Remove the kubelet's ``kubepods`` cgroups in every hierarchy, leaves first."""
    for top in _cgroups():
        for directory in sorted(
            (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        ):
            directory.rmdir()
        top.rmdir()


def remove_files() -> None:
    """The node's directories, the bridge and the kubelet's log symlinks into them."""
    if CONTAINER_LOGS.exists():
        for link in CONTAINER_LOGS.iterdir():
            if link.is_symlink() and str(link.readlink()).startswith(str(STATE_DIR)):
                link.unlink()
    for directory in (STATE_DIR, RUN_DIR):
        if directory.exists():
            shutil.rmtree(directory)
    if _has_link(BRIDGE):
        _run(["ip", "link", "delete", BRIDGE])


def leftovers() -> list[str]:
    """Anything of the node still on the machine: processes, mounts, links, chains, files."""
    found = [f"process {pid} (containerd shim)" for pid in node_processes()]
    found += [f"mount {m}" for m in _mounts_under((STATE_DIR, RUN_DIR))]
    if _has_link(BRIDGE):
        found.append(f"network interface {BRIDGE}")
    veths = _run(["ip", "-o", "link", "show", "master", BRIDGE], check=False).stdout
    found += [f"network interface {line.split(':')[1].strip()}" for line in veths.splitlines()]
    for family in ("iptables-save", "ip6tables-save"):
        found += [f"{family}: {line}" for line in _iptables_chains(family)]
    found += [f"cgroup {c}" for c in _cgroups()]
    found += [f"directory {d}" for d in (STATE_DIR, RUN_DIR) if d.exists()]
    return found


def teardown(bin_dir: Path, plane: Path) -> None:
    """Remove what the node made, once its kubelet, kube-proxy and containerd are stopped."""
    kill_containers((bin_dir / "runc").resolve())
    proxy_config = plane / "kube-proxy.yaml"
    if proxy_config.exists() and (bin_dir / "kube-proxy").exists():
        _run([str(bin_dir / "kube-proxy"), f"--config={proxy_config}", "--cleanup"], check=False)
    unmount_all()
    remove_iptables()
    remove_cgroups()
    remove_files()
