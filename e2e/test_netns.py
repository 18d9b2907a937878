"""The network-fault harness (e2e/netns.py) does what each fault says, and leaves nothing (#20).

kubectl runs inside the namespace against the relay; each fault is checked by what it does to
a request: a partition makes it hang, a delay slows it by the RTT per round trip, loss and
reordering show in the namespace's own counters (iptables, nstat), a bandwidth limit slows an
upload to the rate, a stall holds a watch stream while a request is answered.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import netns
from e2e.cluster import ROOT, Cluster, kubectl_binary

pytestmark = [pytest.mark.chaos]


@pytest.fixture
def link(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[netns.NetNs, Path]]:
    if (why := netns.available()) is not None:
        pytest.skip(why)
    namespace = netns.NetNs(api_server=cluster.api_client().configuration.host).create()
    try:
        yield namespace, namespace.kubeconfig(cluster.kubeconfig, tmp_path / "kubeconfig")
    finally:
        namespace.delete()
    assert namespace.name not in netns.run("ip", "netns", "list").stdout
    assert namespace.host_link not in netns.run("ip", "-o", "link", "show").stdout


def kubectl(link: tuple[netns.NetNs, Path], *args: str, timeout: float = 30) -> tuple[int, float]:
    """Run kubectl in the namespace: (exit code, seconds); -1 when it ran out of ``timeout``."""
    namespace, kubeconfig = link
    began = time.monotonic()
    try:
        done = subprocess.run(
            [*namespace.exec_prefix(), kubectl_binary(), "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - began
    return done.returncode, time.monotonic() - began


def readyz(link: tuple[netns.NetNs, Path], timeout: float = 30) -> tuple[int, float]:
    return kubectl(link, "get", "--raw", "/readyz", timeout=timeout)


def nstat(namespace: netns.NetNs, counter: str) -> int:
    for line in namespace.ns("nstat", "-az", counter).stdout.splitlines():
        if line.startswith(counter):
            return int(line.split()[1])
    raise AssertionError(f"no {counter}")


def upload(link: tuple[netns.NetNs, Path], tmp_path: Path, size: int) -> tuple[int, float]:
    """A server-side dry-run create of a ConfigMap of ``size`` bytes: that many bytes sent."""
    data = tmp_path / "data.txt"
    data.write_text("x" * size)
    return kubectl(
        link, "create", "configmap", "netfault-upload", "-n", "default",
        f"--from-file={data}", "--dry-run=server", "-o", "name",
    )  # fmt: skip


def test_partition_and_delay(link: tuple[netns.NetNs, Path]) -> None:
    namespace = link[0]
    code, clean = readyz(link)
    assert code == 0
    with namespace.partition():
        assert readyz(link, timeout=3)[0] == -1
    with namespace.delay(0.4):
        code, slow = readyz(link)
    assert code == 0
    assert slow >= clean + 2 * 0.4 - 0.1, (clean, slow)  # TLS handshake and the request
    assert readyz(link)[0] == 0


def test_loss_and_reordering_show_in_the_namespace_counters(
    link: tuple[netns.NetNs, Path], tmp_path: Path
) -> None:
    namespace = link[0]
    with namespace.loss(0.2):
        assert upload(link, tmp_path, 300_000)[0] == 0
        rules = namespace.ns("iptables", "-L", netns.CHAIN, "-v", "-x", "-n").stdout
    dropped = sum(int(line.split()[0]) for line in rules.splitlines()[2:] if "DROP" in line)
    assert dropped > 0, rules
    before = nstat(namespace, "TcpExtTCPSACKReorder") + nstat(namespace, "TcpExtTCPTSReorder")
    with namespace.reorder(0.2):
        assert upload(link, tmp_path, 300_000)[0] == 0
    after = nstat(namespace, "TcpExtTCPSACKReorder") + nstat(namespace, "TcpExtTCPTSReorder")
    assert after > before


def test_bandwidth_limit(link: tuple[netns.NetNs, Path], tmp_path: Path) -> None:
    namespace, size, kbit = link[0], 100_000, 256
    with namespace.bandwidth(kbit):
        code, seconds = upload(link, tmp_path, size)
    assert code == 0
    assert seconds >= size * 8 / (kbit * 1000) * 0.8, seconds
    assert upload(link, tmp_path, size)[1] < seconds / 3


def test_stalled_streams_hold_a_watch_while_requests_are_answered(
    link: tuple[netns.NetNs, Path],
) -> None:
    namespace = link[0]
    watch = ("get", "--raw", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=3")
    assert kubectl(link, *watch, timeout=15)[0] == 0  # ends after 3 s on a clean link
    with namespace.stall_streams():
        assert kubectl(link, *watch, timeout=10)[0] == -1  # its end is held
        assert readyz(link, timeout=10)[0] == 0
    assert namespace.relay is not None
    assert namespace.relay.held_chunks > 0


def test_the_cleanup_command_removes_what_a_crashed_run_left(cluster: Cluster) -> None:
    if (why := netns.available()) is not None:
        pytest.skip(why)
    left = netns.NetNs(api_server=cluster.api_client().configuration.host).create()
    assert left.relay is not None
    left.relay.close()  # the crashed run's process is gone, its relay with it
    left.ns("iptables", "-A", netns.CHAIN, "-j", "DROP")
    done = subprocess.run(
        [sys.executable, "-m", "e2e.netns", "cleanup"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"removed netns {left.name}" in done.stdout
    assert left.name not in netns.run("ip", "netns", "list").stdout
    assert left.host_link not in netns.run("ip", "-o", "link", "show").stdout
