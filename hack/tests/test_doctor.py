"""hack/doctor.py (`make doctor`) on this machine, and with a prerequisite taken away."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import doctor
import localplane

ROOT = Path(__file__).resolve().parents[2]


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "hack" / "doctor.py")],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def _fake_go(tmp_path: Path, version: str) -> str:
    """A PATH whose go answers ``go env GOVERSION`` with ``version``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(f"#!/bin/sh\necho {version}\n")
    (bin_dir / "go").chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_this_machine_is_checked_and_told_what_the_plane_changes() -> None:
    """Exit 0 exactly when no line says FIX (a plane of another clone on this machine is one)."""
    done = _doctor({})
    assert "  ok    python3 3.11" in done.stdout
    assert "  ok    go1." in done.stdout
    assert "make cluster-down` undoes all of it" in done.stdout
    assert done.returncode == (1 if "  FIX " in done.stdout else 0), done.stdout + done.stderr


def test_a_go_too_old_to_fetch_the_pinned_toolchain_is_a_fix_with_the_way_out(
    tmp_path: Path,
) -> None:
    """Debian 12's golang-go is 1.19: it cannot fetch the Go the tools pin."""
    done = _doctor({"PATH": _fake_go(tmp_path, "go1.19.8")})
    assert done.returncode == 1
    assert "FIX   go1.19.8 cannot fetch the pinned Go" in done.stdout
    assert "install Go 1.21 or later" in done.stdout
    assert "thing(s) to fix first" in done.stderr


def test_no_go_at_all_is_a_fix() -> None:
    path = ":".join(p for p in os.environ["PATH"].split(":") if not (Path(p) / "go").exists())
    done = _doctor({"PATH": path})
    assert done.returncode == 1
    assert "FIX   no go command" in done.stdout


def test_a_port_the_plane_needs_taken_by_another_program_is_a_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("OPSUITE_PLANE_PORT_BASE", str(port))
        monkeypatch.setattr(localplane, "plane_running", lambda _: False)
        found = doctor.check_host()
    assert any(f.status == "FIX" and str(port) in f.what for f in found), found


def test_a_route_over_the_pods_network_is_a_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip").write_text(
        "#!/bin/sh\necho 'default via 10.0.0.1 dev eth0'\n"
        "echo '10.244.0.0/16 dev docker0 proto kernel scope link src 10.244.0.1'\n"
        "echo '10.244.0.0/24 dev opsuite0 proto kernel scope link src 10.244.0.1'\n"
    )
    (bin_dir / "ip").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert doctor._pod_network_routes() == [
        "10.244.0.0/16 dev docker0 proto kernel scope link src 10.244.0.1"
    ]


def test_images_imports_without_the_virtualenv() -> None:
    """make images runs hack/images.py, and make doctor imports the image toolchain's mirror
    check, with the system's python3, before `make deps` made the virtualenv: no site-packages,
    so nothing beyond the standard library and the repo."""
    code = (
        "import sys; sys.path.insert(0, 'hack'); import images, oci.debian_base;"
        " print(len(images.TARGETS))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 1
