"""hack/localplane.py's bookkeeping, without a cluster: which recorded plane still runs."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import localplane


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
