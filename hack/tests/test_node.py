"""The real node's pure parts (hack/node.py) and its runc wrapper, without a cluster: the node
itself is exercised by every e2e test that runs a pod on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import node

WRAPPER = Path(__file__).resolve().parent.parent / "node" / "runc-wrapper"


def _fake_runc(tmp_path: Path) -> Path:
    """A stand-in for the real runc that records its arguments."""
    runc = tmp_path / "runc"
    runc.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\n')
    runc.chmod(0o755)
    return runc


def _bundle(tmp_path: Path, oom_score_adj: int | None) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    process: dict[str, object] = {"args": ["/pause"]}
    if oom_score_adj is not None:
        process["oomScoreAdj"] = oom_score_adj
    (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.2.0", "process": process}))
    return bundle


def _own_oom_score_adj() -> int:
    return int(Path("/proc/self/oom_score_adj").read_text())


@pytest.mark.parametrize("flag", ["--bundle", "-b"])
def test_wrapper_raises_a_lower_oom_score_adj_to_its_own(tmp_path: Path, flag: str) -> None:
    bundle = _bundle(tmp_path, -998)
    runc = _fake_runc(tmp_path)
    args = ["--root", "/x", "create", flag, str(bundle), "--pid-file", "p", "ctr"]
    env = {**os.environ, "OPSUITE_RUNC": str(runc)}
    subprocess.run([str(WRAPPER), *args], env=env, check=True)
    config = json.loads((bundle / "config.json").read_text())
    assert config["process"]["oomScoreAdj"] == _own_oom_score_adj()
    assert (tmp_path / "args").read_text().split() == args


def test_wrapper_leaves_a_higher_score_and_other_commands_alone(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, 1000)
    before = (bundle / "config.json").read_text()
    runc = _fake_runc(tmp_path)
    env = {**os.environ, "OPSUITE_RUNC": str(runc)}
    subprocess.run([str(WRAPPER), "create", "--bundle", str(bundle), "c"], env=env, check=True)
    subprocess.run([str(WRAPPER), "state", "c"], env=env, check=True)
    assert (bundle / "config.json").read_text() == before
    assert (tmp_path / "args").read_text().split() == ["state", "c"]


def test_wrapper_without_the_real_runc_says_so(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPSUITE_RUNC"}
    done = subprocess.run([str(WRAPPER), "list"], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "OPSUITE_RUNC" in done.stderr


def test_write_if_changed_leaves_an_equal_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.yaml"
    node.write_if_changed(path, "a: 1\n")
    os.utime(path, (1, 1))
    node.write_if_changed(path, "a: 1\n")
    assert path.stat().st_mtime == 1
    node.write_if_changed(path, "a: 2\n")
    assert path.read_text() == "a: 2\n"


def test_configs_name_the_node_and_its_directories() -> None:
    ports = node.NodePorts(1, 2, 3, 4)
    kubelet = json.loads(node.kubelet_config(Path("/ca.crt"), ports))
    assert kubelet["failCgroupV1"] is False
    assert kubelet["address"] == node.NODE_IP
    assert kubelet["registerWithTaints"] == [
        {"key": node.LABEL, "value": "true", "effect": "NoSchedule"}
    ]
    assert kubelet["podLogsDir"].startswith(str(node.STATE_DIR))
    proxy = json.loads(node.kube_proxy_config(Path("/kc"), ports))
    assert proxy["hostnameOverride"] == node.NODE_NAME
    cni = json.loads(node.cni_config())
    (bridge,) = cni["plugins"]
    assert bridge["bridge"] == node.BRIDGE
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["dataDir"].startswith(str(node.STATE_DIR))
    containerd = node.containerd_config()
    for path in (node.SOCKET, node.RUNC_ROOT, node.STATE_DIR / "certs.d"):
        assert f"'{path}" in containerd
    assert "imports = []" in containerd
    assert node.CLOSED_REGISTRY in node.registry_hosts()
    assert 'server = "http://127.0.0.1:5"' in node.registry_hosts("http://127.0.0.1:5")
    assert kubelet["clusterDNS"] == [node.NODE_IP]
    corefile = node.corefile(Path("/kc"))
    assert f"bind {node.NODE_IP}" in corefile
    assert f".:{node.DNS_PORT} " in corefile
    assert f"kubernetes {kubelet['clusterDomain']} " in corefile
    assert "kubeconfig /kc" in corefile


def test_finding_shims_survives_kernel_threads_and_zombies() -> None:
    """/proc holds processes with no arguments (kernel threads such as kthreadd, zombies);
    the shim search must pass them over (a bug that once failed cluster-down)."""
    assert node._cmdline("2") == []
    assert os.getpid() not in node.node_processes()
