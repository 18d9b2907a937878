"""hack/localplane.py's bookkeeping, without a cluster: which recorded plane still runs."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import localplane
import node
import plane_config
import plane_pki

ROOT = Path(__file__).resolve().parents[2]


def _record(plane: Path, pid: int, binary: str) -> Path:
    plane.mkdir()
    (plane / "processes.json").write_text(json.dumps({"etcd": {"pid": pid, "binary": binary}}))
    return plane


def test_a_plane_with_a_live_recorded_process_runs(tmp_path: Path) -> None:
    binary = Path(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().split(b"\0")[0].decode()).name
    assert localplane.plane_running(_record(tmp_path / "plane", os.getpid(), binary))


def test_a_plane_whose_processes_are_gone_does_not_run(tmp_path: Path) -> None:
    """After a reboot the directory and its PID file remain, the processes do not: the real node
    it owned must be claimable (the fresh-clone CI run was refused for this)."""
    assert not localplane.plane_running(_record(tmp_path / "plane", 2**22 + 1, "etcd"))


def test_a_recycled_pid_running_another_binary_does_not_count(tmp_path: Path) -> None:
    assert not localplane.plane_running(_record(tmp_path / "plane", os.getpid(), "etcd"))


def test_a_plane_without_a_directory_does_not_run(tmp_path: Path) -> None:
    assert not localplane.plane_running(tmp_path / "gone")


def test_a_socket_file_nobody_serves_is_not_open(tmp_path: Path) -> None:
    """containerd's socket file outlives a dead containerd: waiting for the file alone let the
    image import run before the new containerd served (the plane's start failed after a reboot)."""
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()
        assert localplane.socket_open(path)
    assert path.exists()
    assert not localplane.socket_open(path)


def test_kube_scheduler_reads_the_plane_s_configuration(tmp_path: Path) -> None:
    """kube-scheduler itself parses the configuration localplane writes (its client's QPS raised
    to 500 from 50, the plane's bottleneck when 500 pods are created at once). Its credentials
    are issued in ``tmp_path`` as localplane issues them: the plane's own are gone after
    ``make cluster-down``."""
    scheduler = localplane.BIN / "kube-scheduler"
    if not scheduler.exists():
        pytest.skip("kube-scheduler is not built (make cluster-deps)")
    pki = tmp_path / "pki"
    plane_pki.make_ca(pki)
    plane_pki.make_cert(pki, "scheduler", "/CN=system:kube-scheduler")
    kubeconfig = tmp_path / "scheduler.kubeconfig"
    plane_pki.write_kubeconfig(kubeconfig, pki, "scheduler", "https://127.0.0.1:6443")
    config = tmp_path / "kube-scheduler.yaml"
    config.write_text(plane_config.scheduler_config(kubeconfig))
    written = tmp_path / "written.yaml"
    subprocess.run(
        [str(scheduler), f"--config={config}", f"--write-config-to={written}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    client = yaml.safe_load(written.read_text())["clientConnection"]
    assert (client["qps"], client["burst"]) == (500, 1000)
    assert client["kubeconfig"] == str(kubeconfig)


@pytest.mark.parametrize("was_running", [False, True])
def test_a_failed_start_stops_what_it_started_unless_the_plane_ran_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, was_running: bool
) -> None:
    """A first `make run` that fails must leave nothing running (the real node claimed by a
    dead start blocked every other clone); a plane that was already partly up is left to
    `make cluster-down`, which the message names."""
    binary = Path(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().split(b"\0")[0].decode()).name
    plane = _record(tmp_path / "plane", os.getpid() if was_running else 2**22 + 1, binary)
    calls: list[str] = []
    monkeypatch.setattr(localplane, "STATE", plane / "processes.json")
    monkeypatch.setattr(localplane, "prepare", lambda: calls.append("prepare"))
    monkeypatch.setattr(node, "preflight", lambda _: [])

    def start() -> None:
        calls.append("start")
        raise SystemExit("kube-apiserver did not become ready")

    monkeypatch.setattr(localplane, "start_plane", start)
    monkeypatch.setattr(localplane, "down", lambda: calls.append("down"))
    with pytest.raises(SystemExit, match="kube-apiserver"):
        localplane.up()
    assert calls == (["prepare", "start"] if was_running else ["prepare", "start", "down"])


def test_every_binary_the_plane_starts_is_one_prepare_builds() -> None:
    """`up` builds the plane's tools itself (a fresh clone's `make run` stopped at a missing
    images.json, then at the registry and CoreDNS binaries, which nothing on its path built):
    every binary `up` starts comes from a tool in PLANE_TOOLS, read from build-tools.sh."""
    script = (ROOT / "hack" / "build-tools.sh").read_text()
    binaries: dict[str, str] = {}
    for tool, packages in re.findall(r"^\s+([a-z-]+)\) echo \"([^\"]+)\" ;;$", script, re.M):
        for package in packages.split():
            name = package.rstrip("/").split("/")[-1]
            binaries[{"v3": "etcd", "server": "etcd"}.get(name, name)] = tool
    source = (ROOT / "hack" / "localplane.py").read_text() + (ROOT / "hack" / "node.py").read_text()
    started = set(re.findall(r"start\(\s*\"[\w-]+\",\s*\"([\w-]+)\"", source))
    assert {"etcd", "kube-apiserver", "registry", "coredns", "kubelet", "containerd"} <= started
    for binary in started:
        assert binaries.get(binary) in localplane.PLANE_TOOLS, binary


def test_certificates_are_issued_once_into_the_directory_given(tmp_path: Path) -> None:
    """The plane's certificates go where they are told (a test's directory, or the plane's), each
    signed by its CA with the names a client checks, and a second ``up`` keeps them: the
    kubeconfigs and running components hold them."""
    pki = tmp_path / "pki"
    plane_pki.make_ca(pki)
    plane_pki.make_cert(pki, "serving", "/CN=serving", server_sans=["IP:127.0.0.1", "DNS:here"])
    issued = {p.name: p.read_bytes() for p in pki.iterdir()}
    assert {"ca.crt", "ca.key", "serving.crt", "serving.key"} <= set(issued)
    assert not {name for name in issued if name.endswith((".csr", ".ext"))}
    checked = subprocess.run(
        ["openssl", "verify", "-CAfile", str(pki / "ca.crt"), str(pki / "serving.crt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-text", "-in", str(pki / "serving.crt")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in text
    assert "DNS:here" in text
    plane_pki.make_ca(pki)
    plane_pki.make_cert(pki, "serving", "/CN=serving", server_sans=["IP:127.0.0.1"])
    assert {p.name: p.read_bytes() for p in pki.iterdir()} == issued

    kubeconfig = tmp_path / "serving.kubeconfig"
    plane_pki.write_kubeconfig(kubeconfig, pki, "serving", "https://127.0.0.1:6443")
    written = json.loads(kubeconfig.read_text())
    assert written["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    user = written["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == issued["serving.crt"]
    assert kubeconfig.stat().st_mode & 0o777 == 0o600
