#!/usr/bin/env python3
"""`make doctor`: what this machine needs for `make run` and `make test`, checked before any build.

Each line says ``ok``, ``warn`` (may get in the way), ``deps`` (missing, and `make deps`
installs it: the line says how) or ``FIX`` (missing, and only you can provide it: the line
gives the command or the reason); then
what the local control plane changes on this machine and how `make cluster-down` undoes it.
Exits 1 when a line says FIX. Nothing is installed or changed here.

Only the standard library (and the plane's own stdlib modules) is used, so it runs on a fresh
machine before any virtualenv, with any Python 3.9 or later.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import localplane
import node

ROOT = Path(__file__).resolve().parent.parent
GO_VERSION = (ROOT / ".go-version").read_text().strip()
APT_PACKAGES = ROOT / "hack" / "apt-packages"
MIN_PYTHON = (3, 11)
MIN_GO_MINOR = 21
"""The oldest go command that fetches the pinned toolchain by itself (GOTOOLCHAIN)."""
MIN_FREE_GIB = 20
"""Module and build caches, the tools, the images and the plane's data after a cold `make test`."""
MIN_MEMORY_GIB = 8


@dataclass(frozen=True)
class Finding:
    status: str  # "ok" | "warn" | "deps" | "FIX"
    what: str
    how: str = ""


def os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    return {
        key: value.strip('"')
        for key, _, value in (line.partition("=") for line in text.splitlines())
        if key
    }


def check_os() -> Finding:
    release = os_release()
    name = release.get("PRETTY_NAME", "an unknown system")
    if release.get("ID") == "debian" and release.get("VERSION_ID") == "12":
        return Finding("ok", name)
    if "debian" in (release.get("ID", "") + " " + release.get("ID_LIKE", "")):
        return Finding("ok", f"{name} (tested on Debian 12; apt is used)")
    return Finding("FIX", f"{name}: apt-get is needed", "use Debian 12 (bookworm)")


def check_root() -> Finding:
    if os.geteuid() == 0:
        return Finding("ok", "root (the real node's kubelet, containerd and runc run as root)")
    return Finding(
        "FIX",
        "not root: the real node's kubelet, containerd and runc run as root, and the plane "
        "makes a bridge and iptables rules",
        "run as root (e.g. `sudo -E make run`)",
    )


def check_python() -> list[Finding]:
    found = []
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] >= MIN_PYTHON:
        found.append(Finding("ok", f"python3 {version}"))
    else:
        wanted = ".".join(map(str, MIN_PYTHON))
        found.append(
            Finding("FIX", f"python3 {version}", f"install Python {wanted} or later as python3")
        )
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        found.append(
            Finding(
                "deps",
                "python3 cannot make a virtualenv",
                "make deps installs python3-venv (poetry runs in its own virtualenv; "
                "pip never installs into the system Python)",
            )
        )
    return found


def go_version() -> str | None:
    if shutil.which("go") is None:
        return None
    done = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def check_go() -> Finding:
    found = go_version()
    how = (
        f"install Go 1.{MIN_GO_MINOR} or later (Debian 12's golang-go is 1.19): "
        "https://go.dev/doc/install"
    )
    if found is None:
        return Finding("FIX", "no go command", how)
    minor = re.match(r"go1\.(\d+)", found)
    if minor is None or int(minor.group(1)) < MIN_GO_MINOR:
        return Finding("FIX", f"{found} cannot fetch the pinned Go {GO_VERSION}", how)
    fetched = "" if found == f"go{GO_VERSION}" else f"; go fetches {GO_VERSION} for the tools"
    return Finding("ok", f"{found}{fetched} (.go-version)")


def apt_packages() -> list[str]:
    return [
        line.split("#", 1)[0].strip()
        for line in APT_PACKAGES.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]


def check_apt() -> Finding:
    if shutil.which("dpkg-query") is None:
        return Finding("FIX", "no dpkg-query: the packages cannot be checked", "use Debian 12")
    missing = []
    for package in apt_packages():
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            capture_output=True,
            text=True,
            check=False,
        )
        if "ok installed" not in done.stdout:
            missing.append(package)
    if missing:
        return Finding(
            "deps",
            f"Debian packages missing: {' '.join(missing)}",
            "make deps apt-get installs them",
        )
    return Finding("ok", f"Debian packages ({len(apt_packages())}, {APT_PACKAGES.name})")


def check_debian_source() -> Finding:
    try:
        from oci.debian_base import debian_mirror  # the image toolchain: Python 3.11, checked above

        mirror = debian_mirror("bookworm")
    except (ImportError, SystemExit):
        return Finding(
            "FIX",
            "no apt source for Debian bookworm main: the images are built from bookworm packages",
            "add one, or set OPSUITE_DEBIAN_MIRROR to a Debian mirror",
        )
    return Finding("ok", f"Debian bookworm packages for the images ({mirror})")


def check_kernel() -> list[Finding]:
    found = []
    if "overlay" in Path("/proc/filesystems").read_text():
        found.append(Finding("ok", "overlay filesystem (containerd's snapshotter)"))
    else:
        found.append(Finding("FIX", "no overlay filesystem", "modprobe overlay"))
    if (node.CGROUP_ROOT / "cgroup.controllers").exists() or (node.CGROUP_ROOT / "cpu").exists():
        found.append(Finding("ok", f"cgroups at {node.CGROUP_ROOT}"))
    else:
        found.append(Finding("FIX", f"no cgroups mounted at {node.CGROUP_ROOT}"))
    return found


def _listeners(port: int, udp: bool = False) -> list[str]:
    """The local addresses of the sockets listening on ``port``, read from /proc/net."""
    found = []
    for name in ("udp", "udp6") if udp else ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if int(hex_port, 16) == port and (udp or fields[3] == "0A"):
                found.append(address)
    return found


def _pod_network_routes() -> list[str]:
    """Routes of this machine that overlap the pods' network on another device."""
    done = subprocess.run(
        ["ip", "-4", "route", "show"], capture_output=True, text=True, check=False
    )
    pods = ipaddress.ip_network(node.POD_CIDR)
    clashes = []
    for line in done.stdout.splitlines():
        words = line.split()
        device = words[words.index("dev") + 1] if "dev" in words else ""
        try:
            network = ipaddress.ip_network(words[0], strict=False)
        except (ValueError, IndexError):
            continue  # "default" and the like
        if network.overlaps(pods) and device != node.BRIDGE:
            clashes.append(line.strip())
    return clashes


def check_host() -> list[Finding]:
    """What would stop the plane from starting: ports, the pod network, the node's owner."""
    found = []
    holder = node.owner()
    ours = holder == localplane.PLANE
    if holder is not None and not ours and localplane.plane_running(holder):
        clone = holder.parent.parent
        found.append(
            Finding(
                "FIX",
                f"the real node belongs to the plane of {clone} (one per machine)",
                f"make -C {clone} cluster-down",
            )
        )
    if not localplane.plane_running(localplane.PLANE):
        ports = localplane.Ports.from_env()
        wanted = [
            ports.etcd_client,
            ports.etcd_peer,
            ports.apiserver,
            ports.controller_manager,
            ports.scheduler,
            ports.kwok,
            ports.registry,
            *vars(ports.node).values(),
        ]
        busy = [p for p in wanted if _listeners(p)]
        if busy:
            found.append(
                Finding(
                    "FIX",
                    f"ports the plane uses are taken: {', '.join(map(str, busy))}",
                    "stop what listens there, or set OPSUITE_PLANE_PORT_BASE",
                )
            )
        else:
            found.append(Finding("ok", f"the plane's ports ({min(wanted)}-{max(wanted)}) free"))
        wildcard = {"00000000", "00000000000000000000000000000000"}
        if wildcard & set(_listeners(node.DNS_PORT, udp=True)):
            found.append(
                Finding(
                    "warn",
                    f"a DNS server listens on every address on port {node.DNS_PORT}: the "
                    f"plane's CoreDNS binds {node.NODE_IP}:{node.DNS_PORT}, which it may refuse",
                    "bind that server to its own addresses only",
                )
            )
        for route in _pod_network_routes():
            found.append(
                Finding(
                    "FIX",
                    f"the pods' network {node.POD_CIDR} is routed elsewhere: {route}",
                    f"free {node.POD_CIDR} for the plane's bridge {node.BRIDGE}",
                )
            )
    return found


def _free_gib(path: Path) -> float:
    while not path.exists():
        path = path.parent
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize / 2**30


def check_resources() -> list[Finding]:
    found = []
    cache = Path(os.environ.get("OPSUITE_CACHE") or Path.home() / ".cache" / "opsuite")
    free = min(_free_gib(cache), _free_gib(ROOT))
    status = "ok" if free >= MIN_FREE_GIB else "FIX"
    found.append(
        Finding(status, f"{free:.0f} GiB free (a cold run needs about {MIN_FREE_GIB} GiB)")
    )
    meminfo = Path("/proc/meminfo").read_text()
    total = int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1)) / 2**20  # type: ignore[union-attr]
    status = "ok" if total >= MIN_MEMORY_GIB else "FIX"
    found.append(Finding(status, f"{total:.0f} GiB of memory (the suite needs {MIN_MEMORY_GIB})"))
    found.append(Finding("ok", f"{os.cpu_count()} CPUs (the README's durations are for 2)"))
    return found


HOST_CHANGES = f"""\
What the local plane changes on this machine (`make cluster-down` undoes all of it):
  - processes: etcd, kube-apiserver (listening on every address), controller-manager,
    scheduler, kwok, a registry, CoreDNS, containerd, kubelet, kube-proxy
  - a bridge {node.BRIDGE} with {node.NODE_IP}/24 (the pods' network), and the pods' veths
  - iptables chains KUBE-* and CNI-* (the kubelet, kube-proxy, the CNI plugins)
  - CoreDNS on {node.NODE_IP}:{node.DNS_PORT} (the pods' DNS)
  - {node.STATE_DIR}, {node.RUN_DIR}, /var/log/pods, {node.CONTAINER_LOGS}
Outside the plane: `make deps` installs Debian packages with apt-get (listed above when
missing); Go, Python and poetry keep their caches under ~/.cache (poetry runs from its own
virtualenv there, its configuration is the repository's poetry.toml); `make tools` builds into
~/.cache/opsuite. Nothing else is written outside this directory."""


def findings() -> list[Finding]:
    return [
        check_os(),
        check_root(),
        *check_python(),
        check_go(),
        check_apt(),
        check_debian_source(),
        *check_kernel(),
        *check_host(),
        *check_resources(),
    ]


def main() -> int:
    found = findings()
    print("make doctor: what make run and make test need on this machine")
    for f in found:
        print(f"  {f.status:<5} {f.what}" + (f"\n        -> {f.how}" if f.how else ""))
    print(HOST_CHANGES)
    blocking = [f for f in found if f.status == "FIX"]
    if blocking:
        print(f"\n{len(blocking)} thing(s) to fix first (FIX above).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
